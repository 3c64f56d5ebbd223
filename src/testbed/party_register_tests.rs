use super::*;

#[test]
fn wildcards_match_prefix_and_suffix() {
    assert!(wildcard_match("*", "anything"));
    assert!(wildcard_match("EU.EORI.NL00000000*", "EU.EORI.NL000000001"));
    assert!(wildcard_match("*trucking", "ABC Trucking"));
    assert!(wildcard_match("a*c", "abc"));
    assert!(!wildcard_match("a*c", "ac-d"));
    assert!(!wildcard_match("ab*ba", "aba"));
    assert!(wildcard_match("abc", "ABC"));
}

#[test]
fn queries_need_a_parameter_and_well_formed_values() {
    let p = |pairs: &[(&str, &str)]| {
        PartiesQuery::parse(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>(),
        )
    };
    assert!(p(&[]).unwrap_err().contains("at least one"));
    assert!(p(&[("unknown", "x")]).is_err());
    assert!(p(&[("name", "a*b*c")]).unwrap_err().contains("single"));
    assert!(p(&[("active_only", "yes")]).is_err());
    assert!(p(&[("eori", "*"), ("page", "0")]).is_err());
    assert!(p(&[("eori", "*"), ("date_time", "soon")]).is_err());
    let q = p(&[("eori", "*"), ("page", "2"), ("active_only", "TRUE")]).unwrap();
    assert_eq!((q.page, q.active_only), (2, Some(true)));
}

#[test]
fn subject_names_compare_as_sets() {
    assert_eq!(
        subject_set("CN=ABC, SERIALNUMBER=EU.EORI.NL1,C=NL"),
        subject_set("c = NL,serialNumber=EU.EORI.NL1, CN=ABC")
    );
    assert_ne!(subject_set("CN=ABC, C=NL"), subject_set("CN=ABC"));
}
