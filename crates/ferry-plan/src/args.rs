//! What the command line hands the planner, parsed once for both engines: the `ferry`
//! binary and the Spark driver (through the native module) call these.

use ferry_api::{FerryError, Result};

/// Parses `-i NAME=VALUE` user variables (SeaTunnel's `-i`): the name is trimmed and must
/// not be empty, the value is kept as written (it may itself contain `=`).
pub fn parse_vars(vars: &[String]) -> Result<Vec<(String, String)>> {
    vars.iter()
        .map(|v| match v.split_once('=') {
            Some((k, val)) if !k.trim().is_empty() => Ok((k.trim().to_string(), val.to_string())),
            _ => Err(FerryError::config(format!("-i {v}: expected NAME=VALUE"))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_split_at_the_first_equals_sign() {
        let v = parse_vars(&[" a =1".into(), "b=x=y".into(), "c=".into()]).unwrap();
        assert_eq!(
            v,
            [
                ("a".to_string(), "1".to_string()),
                ("b".into(), "x=y".into()),
                ("c".into(), String::new())
            ]
        );
        for bad in ["novalue", "=1", " =1"] {
            let e = parse_vars(&[bad.to_string()]).unwrap_err().to_string();
            assert!(e.contains(&format!("-i {bad}: expected NAME=VALUE")), "{e}");
        }
    }
}
