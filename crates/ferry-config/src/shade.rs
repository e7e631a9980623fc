//! SeaTunnel's config shade (`env.shade.identifier`): sensitive options of sources and
//! sinks written encoded in the job file, decoded before any plugin reads them
//! (`ConfigShadeUtils` in SeaTunnel's starter).

use base64::Engine;
use serde_json::{Map, Value};

use ferry_api::Result;

/// The options SeaTunnel decodes in every source and sink block
/// (`ConfigShadeUtils.DEFAULT_SENSITIVE_KEYWORDS`).
const SENSITIVE: &[&str] = &["password", "username", "auth", "token"];

/// The shade named by the `env` block, if any: `shade.identifier` as a dotted key or as
/// `shade { identifier = … }`.
pub(crate) fn identifier(env: &Map<String, Value>) -> Option<String> {
    let v = env
        .get("shade.identifier")
        .or_else(|| env.get("shade").and_then(|s| s.get("identifier")))?;
    v.as_str().map(str::to_string)
}

/// Decodes the sensitive options of every source and sink block in `root` with the shade
/// `identifier`. SeaTunnel loads shades as plugins; Ferry knows its built-in `base64` (and
/// the default, which leaves values as they are) and refuses others, since passing an
/// encrypted password on as it is would only fail later, less clearly.
pub(crate) fn decode(root: &mut Map<String, Value>, identifier: &str, file: &str) -> Result<()> {
    match identifier {
        "default" => return Ok(()),
        "base64" => {}
        other => {
            return Err(crate::file_error(
                file,
                None,
                format!(
                    "env.shade.identifier = \"{other}\" is not supported: Ferry decodes \"base64\" only"
                ),
            ))
        }
    }
    for section in ["source", "sink"] {
        let blocks: Vec<&mut Value> = match root.get_mut(section) {
            Some(Value::Object(m)) => m.values_mut().collect(),
            Some(Value::Array(items)) => items
                .iter_mut()
                .flat_map(|i| match i {
                    Value::Object(m) => m.values_mut().collect::<Vec<_>>(),
                    _ => Vec::new(),
                })
                .collect(),
            _ => Vec::new(),
        };
        for block in blocks {
            let Value::Object(options) = block else {
                continue;
            };
            for key in SENSITIVE {
                let Some(Value::String(text)) = options.get(*key) else {
                    continue;
                };
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| {
                        // The value is a secret: the message names the option only.
                        crate::file_error(
                            file,
                            None,
                            format!("option '{key}' of a {section} is not base64 text, as env.shade.identifier = \"base64\" says it is"),
                        )
                    })?;
                options.insert((*key).to_string(), Value::String(decoded));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn base64_shaded_secrets_of_sources_and_sinks_are_decoded_and_others_left_alone() {
        let mut root = json!({
            "source": {"Redis": {"auth": "U2VhVHVubmVs", "keys": "U2VhVHVubmVs"}},
            "sink": [{"Jdbc": {"password": "cGFzcw==", "username": "dXNlcg=="}}],
        })
        .as_object()
        .cloned()
        .unwrap();
        decode(&mut root, "base64", "job.conf").unwrap();
        assert_eq!(root["source"]["Redis"]["auth"], "SeaTunnel");
        assert_eq!(root["source"]["Redis"]["keys"], "U2VhVHVubmVs");
        assert_eq!(root["sink"][0]["Jdbc"]["password"], "pass");
        assert_eq!(root["sink"][0]["Jdbc"]["username"], "user");
        let mut bad = json!({"source": {"Redis": {"auth": "not base64!"}}})
            .as_object()
            .cloned()
            .unwrap();
        let err = decode(&mut bad, "base64", "job.conf")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'auth'") && !err.contains("not base64!"),
            "{err}"
        );
        let err = decode(&mut bad, "aes", "job.conf").unwrap_err().to_string();
        assert!(err.contains("aes"), "{err}");
        assert_eq!(
            identifier(
                json!({"shade": {"identifier": "base64"}})
                    .as_object()
                    .unwrap()
            ),
            Some("base64".into())
        );
    }
}
