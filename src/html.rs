//! The few HTML pages people see (login, consent, errors, the policy administration): one layout,
//! and every value escaped.

/// `text` safe inside HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `title` (escaped here) and `body` (HTML, escaped by the caller).
pub fn page(title: &str, body: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; background: #f4f6f8; color: #1c2833; margin: 0; }}
main {{ max-width: 40rem; margin: 3rem auto; background: #fff; padding: 2rem 2.5rem; border-radius: 8px; box-shadow: 0 1px 4px rgba(0,0,0,.12); }}
h1 {{ font-size: 1.4rem; margin-top: 0; }}
label {{ display: block; margin: .8rem 0 .2rem; font-weight: 600; }}
input[type=text], input[type=password], textarea {{ width: 100%; padding: .5rem; box-sizing: border-box; border: 1px solid #aab; border-radius: 4px; font: inherit; }}
textarea {{ font-family: monospace; font-size: .85rem; }}
fieldset {{ border: 1px solid #dde; border-radius: 4px; margin: 1rem 0; }}
fieldset label {{ font-weight: normal; display: flex; gap: .5rem; align-items: baseline; }}
td button {{ margin: 0; }}
button {{ margin: 1rem .5rem 0 0; padding: .55rem 1.2rem; border: 0; border-radius: 4px; background: #1f5fa8; color: #fff; font: inherit; cursor: pointer; }}
button.secondary {{ background: #8a96a3; }}
.error {{ background: #fdecea; color: #8a1c1c; padding: .7rem 1rem; border-radius: 4px; }}
.note {{ color: #56606b; font-size: .9rem; }}
table {{ border-collapse: collapse; width: 100%; font-size: .85rem; }}
td, th {{ border-bottom: 1px solid #dde; padding: .3rem; text-align: left; vertical-align: top; }}
</style>
</head>
<body>
<main>
<h1>{title}</h1>
{body}
</main>
</body>
</html>
"#,
        title = escape(title),
    )
}

/// The hidden inputs and the action of the first form of a page.
pub fn form_of(page: &str) -> Option<(String, Vec<(String, String)>)> {
    let start = page.find("<form")?;
    let form = &page[start..];
    let end = form.find("</form>").unwrap_or(form.len());
    let form = &form[..end];
    let action = attribute(&form[..form.find('>')?], "action")?;
    let mut fields = Vec::new();
    for input in form.split("<input").skip(1) {
        let tag = &input[..input.find('>').unwrap_or(input.len())];
        if attribute(tag, "type").as_deref() == Some("hidden") {
            if let (Some(name), Some(value)) = (attribute(tag, "name"), attribute(tag, "value")) {
                fields.push((name, value));
            }
        }
    }
    Some((action, fields))
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let marker = format!(" {name}=\"");
    let start = tag.find(&marker)? + marker.len();
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

/// HTML text back to plain text (the entities `escape` writes).
pub fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_text() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert!(page("<b>", "").contains("<title>&lt;b&gt;</title>"));
    }

    #[test]
    fn a_form_is_read_with_its_hidden_fields_unescaped() {
        let page = page(
            "t",
            r#"<form id="f" method="post" action="https://idp.test/a?x=1&amp;y=2"><input type="hidden" name="request" value="a.b&amp;c"><input type="text" name="user"></form>"#,
        );
        let (action, fields) = form_of(&page).unwrap();
        assert_eq!(action, "https://idp.test/a?x=1&y=2");
        assert_eq!(fields, [("request".to_string(), "a.b&c".to_string())]);
    }
}
