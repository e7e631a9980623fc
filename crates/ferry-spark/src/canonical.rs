//! Canonical JSON: Spark compares offsets as JSON strings, so the same state must always
//! print the same way (object keys sorted, no whitespace).

use serde_json::{Map, Value};

/// `v` with the keys of every object, at every depth, in sorted order.
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::with_capacity(m.len());
            for k in keys {
                if let Some(x) = m.get(k) {
                    out.insert(k.clone(), sorted(x));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The canonical text of `v`.
pub fn to_string(v: &Value) -> String {
    sorted(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_same_state_prints_the_same_whatever_the_key_order() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":[{"q":1,"p":2}],"x":null}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":null,"y":[{"p":2,"q":1}]},"b":1}"#).unwrap();
        assert_eq!(to_string(&a), to_string(&b));
        assert_eq!(
            to_string(&a),
            r#"{"a":{"x":null,"y":[{"p":2,"q":1}]},"b":1}"#
        );
    }

    #[test]
    fn array_order_is_kept() {
        assert_eq!(to_string(&json!([3, 1, 2])), "[3,1,2]");
    }
}
