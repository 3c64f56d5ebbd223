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
}
