//! Tests of the whole reading: conformance job files, variables, sections, wiring, errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferry_api::JobMode;
use serde_json::{json, Value};

use crate::*;

/// SeaTunnel's conformance pack: `$FERRY_CONFORMANCE_DIR`, or `shared/` beside the clone.
fn cases_dir() -> PathBuf {
    match std::env::var_os("FERRY_CONFORMANCE_DIR") {
        Some(d) => d.into(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/seatunnel"),
    }
}

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse(text: &str) -> Result<JobFile> {
    parse_job(text, "job.conf", &HashMap::new())
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(job) => panic!("expected an error, got {job:?}"),
        Err(e) => e.to_string(),
    }
}

fn raw(p: &PluginConfig, key: &str) -> Value {
    let mut o = p.options.clone();
    o.get(key).unwrap_or(Value::Null)
}

/// The variables of each case in cases.tsv, with `$(date …)` evaluated to a fixed day.
fn case_vars() -> HashMap<String, Vec<(String, String)>> {
    let tsv = std::fs::read_to_string(cases_dir().join("cases.tsv"))
        .expect("conformance cases.tsv is readable");
    let mut out = HashMap::new();
    for line in tsv.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let pairs = cols
            .get(3)
            .map(|v| {
                v.split(';')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.replace("$(date +\"%Y%m%d\")", "20261129")))
                    .collect()
            })
            .unwrap_or_default();
        out.insert(cols[0].to_string(), pairs);
    }
    out
}

fn conf_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("conformance cases are readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            conf_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "conf") {
            out.push(path);
        }
    }
}

fn load_case(name: &str) -> JobFile {
    let vars = case_vars().remove(name).unwrap_or_default();
    load_job(&cases_dir().join("cases").join(name), &vars).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_conformance_job_file_parses_and_is_wired() {
    let vars = case_vars();
    let root = cases_dir().join("cases");
    let mut files = Vec::new();
    conf_files(&root, &mut files);
    assert!(files.len() >= 31, "found only {} job files", files.len());
    for path in files {
        let name = path
            .strip_prefix(&root)
            .expect("under cases")
            .display()
            .to_string();
        let v = vars.get(&name).cloned().unwrap_or_default();
        let job = load_job(&path, &v).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!job.sources.is_empty() && !job.sinks.is_empty(), "{name}");
        let outputs: Vec<&str> = job
            .sources
            .iter()
            .chain(&job.transforms)
            .map(|p| p.output.as_str())
            .collect();
        for p in job.transforms.iter().chain(&job.sinks) {
            assert!(
                !p.inputs.is_empty(),
                "{name}: {} has no input",
                p.describe()
            );
            for i in &p.inputs {
                assert!(
                    outputs.contains(&i.as_str()),
                    "{name}: {} reads unknown {i}",
                    p.describe()
                );
            }
        }
        for p in job.plugins() {
            assert!(
                p.options.location().line.is_some(),
                "{name}: {} has no line",
                p.describe()
            );
            // The wiring keys are read already: a plugin that reads nothing else passes.
            let mut o = p.options.clone();
            for k in o.raw().keys().cloned().collect::<Vec<_>>() {
                if ![
                    "plugin_output",
                    "result_table_name",
                    "plugin_input",
                    "source_table_name",
                    "parallelism",
                ]
                .contains(&k.as_str())
                {
                    o.get(&k);
                }
            }
            o.finish(&[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(
            !job.warnings.iter().any(|w| w.contains("unknown key")),
            "{name}: {:?}",
            job.warnings
        );
        assert_eq!(job.fingerprint.len(), 64);
    }
}

#[test]
fn conformance_copy_transform_keeps_both_copy_blocks() {
    let job = load_case("transform/copy_transform.conf");
    assert_eq!(job.transforms.len(), 2);
    let (a, b) = (&job.transforms[0], &job.transforms[1]);
    assert_eq!(
        (
            a.name.as_str(),
            a.index,
            a.output.as_str(),
            a.inputs.clone()
        ),
        ("Copy", 0, "fake1", vec!["fake".to_string()])
    );
    assert_eq!(
        (
            b.name.as_str(),
            b.index,
            b.output.as_str(),
            b.inputs.clone()
        ),
        ("Copy", 1, "fake2", vec!["fake1".to_string()])
    );
    assert_eq!(raw(a, "src_field"), json!("name"));
    assert!(!b.options.contains("src_field"));
    assert_eq!(raw(b, "fields.id_1"), json!("id"));
    assert_eq!(a.options.location().line, Some(44));
    assert_eq!(b.options.location().line, Some(50));
    assert_eq!(b.options.location().line_of("fields.name2"), Some(55));
    let sink = &job.sinks[0];
    assert_eq!(sink.inputs, vec!["fake2"]);
    assert_eq!(
        sink.options
            .location()
            .line_of("rules.field_rules[1].field_name"),
        Some(84)
    );
    assert_eq!(
        job.sources[0]
            .options
            .location()
            .line_of("schema.fields.c_row.c_row.c_int"),
        Some(35)
    );
    assert_eq!(
        job.sources[0].options.location().line_of("row.num"),
        Some(28)
    );
}

#[test]
fn conformance_variables_case() {
    let job = load_case("engine/fake_to_console.variables.conf");
    assert_eq!(job.env.parallelism, Some(2));
    let src = &job.sources[0];
    assert_eq!(src.output, "a20261129");
    assert_eq!(raw(src, "row.num"), json!("10"));
    assert_eq!(raw(src, "string.template"), json!("[abc,def]"));
    assert_eq!(
        src.options.clone().string_list("string.template").unwrap(),
        Some(vec!["abc".to_string(), "def".to_string()])
    );
    assert_eq!(raw(src, "schema.fields.name"), json!("string"));
    let sql = &job.transforms[0];
    assert_eq!(sql.name, "sql");
    assert_eq!(sql.inputs, vec!["a20261129"]);
    assert_eq!(
        raw(sql, "query"),
        json!("select * from a20261129 where name = 'abc' ")
    );
    assert_eq!(job.sinks[0].inputs, vec!["sql"]);
}

#[test]
fn conformance_default_value_case() {
    let job = load_case("engine/fake_to_console_with_default_value.variables.conf");
    assert_eq!(
        job.env.job_name.as_deref(),
        Some("fake_to_console_with_default_value")
    );
    let src = &job.sources[0];
    assert_eq!(src.output, "fake_test_table");
    assert_eq!(raw(src, "row.num"), json!("50"));
    assert_eq!(src.options.clone().i64("row.num").unwrap(), Some(50));
    assert_eq!(raw(src, "int.template"), json!([20, 21]));
    assert_eq!(
        raw(src, "schema.fields"),
        json!({"name": "string", "age": "int"})
    );
    let sql = &job.transforms[0];
    assert_eq!(sql.inputs, vec!["fake_test_table"]);
    assert_eq!(
        raw(sql, "query"),
        json!("select * from fake_test_table where name = 'abc' ")
    );
    assert_eq!(job.sinks[0].inputs, vec!["sql"]);
}

#[test]
fn conformance_file_sink_placeholders_survive() {
    let job = load_case("engine/batch_fakesource_to_file.conf");
    assert!(job.transforms.is_empty());
    let sink = &job.sinks[0];
    assert_eq!(sink.inputs, vec!["fake"]);
    assert_eq!(raw(sink, "partition_dir_expression"), json!("${k0}=${v0}"));
    assert_eq!(
        raw(sink, "file_name_expression"),
        json!("${transactionId}_${now}")
    );
    assert_eq!(raw(sink, "field_delimiter"), json!("\t"));
    assert_eq!(raw(sink, "partition_by"), json!(["c_string"]));
    assert_eq!(job.sources[0].parallelism, Some(1));
    assert_eq!(
        raw(&job.sources[0], "schema.fields.c_decimal"),
        json!("decimal(30, 8)")
    );
    assert_eq!(raw(&job.sources[0], "schema.fields.c_null"), json!("null"));
}

#[test]
fn conformance_env_and_implicit_wiring() {
    let job = load_case("fake/fake_to_assert_with_range.conf");
    assert_eq!(job.sources[0].output, "__source_0");
    assert_eq!(job.sinks[0].inputs, vec!["__source_0"]);
    assert_eq!(raw(&job.sources[0], "float.min").to_string(), "40.0");
    assert_eq!(job.env.extra.get("spark.master"), Some(&json!("local")));
    assert_eq!(job.env.mode, JobMode::Batch);

    let job = load_case("engine/stream_fakesource_to_localfile.conf");
    assert_eq!(job.env.mode, JobMode::Streaming);
    assert_eq!(job.env.parallelism, Some(1));
    assert_eq!(raw(&job.sources[0], "split.read-interval"), json!(3000));

    let job = load_case("transform/sql/func_string.conf");
    assert_eq!(job.env.checkpoint_interval_ms, Some(10000));
    assert_eq!(job.transforms[0].name, "sql");

    let job = load_case("engine/fakesource_to_console.conf");
    assert_eq!(job.sinks[0].name, "console");
    assert_eq!(job.sinks[0].inputs, vec!["fake"]);
}

#[test]
fn fingerprint_is_stable_and_follows_variables() {
    let a = load_case("engine/fake_to_console.variables.conf");
    let b = load_case("engine/fake_to_console.variables.conf");
    assert_eq!(a.fingerprint, b.fingerprint);
    let text = "source { S { x = ${v} } }\nsink { K {} }";
    let f1 = parse_job(text, "j.conf", &vars(&[("v", "1")]))
        .unwrap()
        .fingerprint;
    let f2 = parse_job(text, "j.conf", &vars(&[("v", "2")]))
        .unwrap()
        .fingerprint;
    let f1_again = parse_job(
        &format!("# a comment\n{text}"),
        "other.conf",
        &vars(&[("v", "1")]),
    )
    .unwrap()
    .fingerprint;
    assert_ne!(f1, f2);
    assert_eq!(
        f1, f1_again,
        "comments and the file name do not change the fingerprint"
    );
}

// ---- variables ----

#[test]
fn variables_defaults_and_literals() {
    let text = r#"
env { job.name = "${name:default_job}" }
source { S {
  plugin_output = ${out}
  a = "${missing}/x"
  b = /tmp/${missing2}/y
  c = "${table_name}"
  d = ${missing3}
} }
sink { K { plugin_input = "${out}" } }
"#;
    let job = parse_job(text, "j.conf", &vars(&[("out", "t1")])).unwrap();
    assert_eq!(job.env.job_name.as_deref(), Some("default_job"));
    let s = &job.sources[0];
    assert_eq!(s.output, "t1");
    assert_eq!(raw(s, "a"), json!("${missing}/x"));
    assert_eq!(raw(s, "b"), json!("/tmp/${missing2}/y"));
    assert_eq!(raw(s, "c"), json!("${table_name}"));
    assert_eq!(raw(s, "d"), json!("${missing3}"));
    assert_eq!(job.sinks[0].inputs, vec!["t1"]);
    let job = parse_job(text, "j.conf", &vars(&[("out", "t1"), ("name", "given")])).unwrap();
    assert_eq!(job.env.job_name.as_deref(), Some("given"));
}

#[test]
fn variables_come_from_the_environment_when_loading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.conf");
    std::fs::write(&path, "source { S { a = \"${FERRY_CONFIG_TEST_VAR_A}\", b = ${FERRY_CONFIG_TEST_VAR_B} } }\nsink { K {} }").unwrap();
    // A name no other test uses, so setting it cannot disturb them.
    std::env::set_var("FERRY_CONFIG_TEST_VAR_A", "from-env");
    std::env::set_var("FERRY_CONFIG_TEST_VAR_B", "env-b");
    let job = load_job(
        &path,
        &[("FERRY_CONFIG_TEST_VAR_B".into(), "from-i".into())],
    )
    .unwrap();
    assert_eq!(raw(&job.sources[0], "a"), json!("from-env"));
    assert_eq!(
        raw(&job.sources[0], "b"),
        json!("from-i"),
        "-i wins over the environment"
    );
    // parse_job does not look at the environment.
    let job = parse_job(
        &std::fs::read_to_string(&path).unwrap(),
        "j.conf",
        &HashMap::new(),
    )
    .unwrap();
    assert_eq!(
        raw(&job.sources[0], "a"),
        json!("${FERRY_CONFIG_TEST_VAR_A}")
    );
}

#[test]
fn system_placeholders_cannot_be_variables() {
    let e = parse_job(
        "source { S {} }\nsink { K {} }",
        "j.conf",
        &vars(&[("table_name", "x")]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("variable 'table_name' cannot be set"), "{e}");
}

#[test]
fn hocon_substitutions_between_keys_coexist_with_variables() {
    let text = "env { parallelism = 3 }\nsource { S { parallelism = ${env.parallelism}, p = ${env.parallelism}\"/x\" } }\nsink { K {} }";
    let job = parse(text).unwrap();
    assert_eq!(job.sources[0].parallelism, Some(3));
    assert_eq!(raw(&job.sources[0], "p"), json!("3/x"));
    // Object concatenation with a substitution.
    let job =
        parse("source { S { base { a = 1 } } }\nsink { K { o = ${source.S.base} { b = 2 } } }")
            .unwrap();
    assert_eq!(raw(&job.sinks[0], "o"), json!({"a": 1, "b": 2}));
    // A variable of the same name wins, as in SeaTunnel.
    let job = parse_job(text, "j.conf", &vars(&[("env.parallelism", "5")])).unwrap();
    assert_eq!(job.sources[0].parallelism, Some(5));
}

// ---- sections and plugin blocks ----

#[test]
fn hocon_forms_are_accepted() {
    let text = r#"
env: { "job.mode": streaming }
source = {
  FakeSource {
    row.num: 5
    "split.num" = 2
    list = [1, 2]
    list += 3
    text = """multi
line"""
    concat = abc "def" 1
    // comment
  }
}
source.Other { x = 1 }
sink { console {} }
"#;
    let job = parse(text).unwrap();
    assert_eq!(job.env.mode, JobMode::Streaming);
    assert_eq!(job.sources.len(), 2);
    let s = &job.sources[0];
    assert_eq!(s.options.clone().i64("row.num").unwrap(), Some(5));
    assert_eq!(raw(s, "split.num"), json!(2));
    assert_eq!(raw(s, "list"), json!([1, 2, 3]));
    assert_eq!(raw(s, "text"), json!("multi\nline"));
    assert_eq!(raw(s, "concat"), json!("abc def 1"));
    assert_eq!(s.options.location().line_of("split.num"), Some(6));
    assert_eq!(job.sources[1].name, "Other");
    // Two sources and no transform: the sink reads both.
    assert_eq!(job.sinks[0].inputs, vec!["__source_0", "__source_1"]);
}

#[test]
fn duplicate_plugin_blocks_stay_apart_in_order() {
    let text = "source { S { plugin_output = a } }\ntransform {\n  F { n = 1 }\n  G { n = 2 }\n  \"F\" {\n    n = 3\n  }\n}\nsink {\n  K { plugin_input = __transform_2 }\n  K { }\n}";
    let job = parse(text).unwrap();
    let names: Vec<(&str, i64)> = job
        .transforms
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.options.clone().i64("n").unwrap().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(names, [("F", 1), ("G", 2), ("F", 3)]);
    assert_eq!(job.transforms[2].options.location().line_of("n"), Some(6));
    assert_eq!(job.transforms[0].inputs, vec!["a"]);
    assert_eq!(job.transforms[1].inputs, vec!["__transform_0"]);
    assert_eq!(job.transforms[2].inputs, vec!["__transform_1"]);
    assert_eq!(job.sinks.len(), 2);
    assert_eq!(job.sinks[0].inputs, vec!["__transform_2"]);
    assert_eq!(job.sinks[1].inputs, vec!["__transform_2"]);
    assert_eq!(job.sinks[1].index, 1);
}

#[test]
fn implicit_wiring_with_several_sources() {
    let job = parse("source { A { plugin_output = a }\n B { result_table_name = b } }\ntransform { T {} }\nsink { K {} }").unwrap();
    assert_eq!(job.transforms[0].inputs, vec!["a", "b"]);
    assert_eq!(job.sinks[0].inputs, vec!["__transform_0"]);
    let job = parse("source { A { plugin_output = a }\n B { plugin_output = b } }\nsink { K { plugin_input = [a, b] }\n L { source_table_name = \"b, a\" } }").unwrap();
    assert_eq!(job.sinks[0].inputs, vec!["a", "b"]);
    assert_eq!(job.sinks[1].inputs, vec!["b", "a"]);
    assert!(job.sinks[0].output.is_empty());
}

#[test]
fn json_job_files() {
    let text = r#"{
  "env": {"job.mode": "batch", "parallelism": 2},
  "source": [
    {"plugin_name": "FakeSource", "result_table_name": "fake", "row.num": 100,
     "schema": {"fields": {"name": "string"}}}
  ],
  "transform": [
    {"plugin_name": "Filter", "source_table_name": "fake", "result_table_name": "fake1", "fields": ["name"]}
  ],
  "sink": [
    {"plugin_name": "Console",
     "source_table_name": "fake1"}
  ]
}"#;
    let job = parse_job(text, "job.json", &HashMap::new()).unwrap();
    assert_eq!(job.env.parallelism, Some(2));
    assert_eq!(job.sources[0].name, "FakeSource");
    assert!(!job.sources[0].options.contains("plugin_name"));
    assert_eq!(raw(&job.sources[0], "row.num"), json!(100));
    assert_eq!(job.transforms[0].inputs, vec!["fake"]);
    assert_eq!(job.sinks[0].inputs, vec!["fake1"]);
    assert_eq!(job.sinks[0].options.location().line, Some(11));
    assert_eq!(
        job.sinks[0].options.location().line_of("source_table_name"),
        Some(12)
    );
    let e = parse_job(
        r#"{"source": [{"x": 1}], "sink": [{"plugin_name": "K"}]}"#,
        "job.json",
        &HashMap::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("plugin_name"), "{e}");
}

#[test]
fn includes_are_relative_to_the_job_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("conf")).unwrap();
    std::fs::write(
        dir.path().join("conf/common.conf"),
        "env { parallelism = 4 }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("conf/job.conf"),
        "include \"common.conf\"\nsource { S {} }\nsink { K {} }\n",
    )
    .unwrap();
    let job = load_job(&dir.path().join("conf/job.conf"), &[]).unwrap();
    assert_eq!(job.env.parallelism, Some(4));
}

#[test]
fn unknown_env_keys_are_warnings() {
    let job = parse("env {\n  job.mode = BATCH\n  my.setting = 1\n  spark.master = local\n}\nsource { S {} }\nsink { K {} }").unwrap();
    assert_eq!(job.warnings.len(), 1, "{:?}", job.warnings);
    assert!(
        job.warnings[0].starts_with("job.conf:3: env: unknown key 'my.setting'"),
        "{:?}",
        job.warnings
    );
    assert_eq!(job.env.extra.get("my.setting"), Some(&json!(1)));
}

// ---- errors ----

#[test]
fn syntax_error_names_file_line_and_column() {
    let e = err("env {\n  job.mode = BATCH\n}\nsource {\n  S { a = [1, 2 }\n}\n");
    assert!(e.starts_with("job.conf:5: syntax error at column"), "{e}");
}

#[test]
fn unknown_section_is_an_error() {
    let e = err("env {}\nsorce { S {} }\nsource { S {} }\nsink { K {} }");
    assert_eq!(e, "job.conf:2: unknown section 'sorce' (did you mean 'source'? a job file has the sections env, source, transform and sink)");
}

#[test]
fn missing_or_empty_source_and_sink_are_errors() {
    assert_eq!(
        err("sink { K {} }"),
        "job.conf: the job file has no 'source' section; a job needs at least one source"
    );
    assert_eq!(
        err("source { S {} }"),
        "job.conf: the job file has no 'sink' section; a job needs at least one sink"
    );
    assert_eq!(
        err("source { S {} }\nsink {\n}"),
        "job.conf:2: the 'sink' section is empty; a job needs at least one sink"
    );
    assert!(err("source { S = 1 }\nsink { K {} }").contains("a plugin must be a block"));
    assert!(err("source = 1\nsink { K {} }").contains("'source' must be a block of plugins"));
}

#[test]
fn bad_job_mode_lists_valid_values() {
    let e = err("env {\n  job.mode = \"SOMETIMES\"\n}\nsource { S {} }\nsink { K {} }");
    assert_eq!(e, "job.conf:2: env: option 'job.mode': invalid value 'SOMETIMES' (valid values: BATCH, STREAMING)");
}

#[test]
fn misspelt_env_key_is_an_error() {
    let e = err("env {\n  paralelism = 2\n}\nsource { S {} }\nsink { K {} }");
    assert_eq!(
        e,
        "job.conf:2: env: option 'paralelism': unknown env key (did you mean 'parallelism'?)"
    );
}

#[test]
fn unknown_input_table_names_plugin_option_and_known_tables() {
    let e = err("source {\n  S { plugin_output = fake }\n}\ntransform {\n  T {\n    source_table_name = fak\n    password = \"hunter2\"\n  }\n}\nsink { K {} }");
    assert_eq!(
        e,
        "job.conf:6: transform T: option 'source_table_name': unknown table 'fak': no earlier plugin emits it (did you mean 'fake'? known tables: fake)"
    );
    assert!(!e.contains("hunter2"));
    // A transform cannot read a table emitted by a later transform.
    let e = err("source { S { plugin_output = a } }\ntransform {\n  T { plugin_input = b }\n  U { plugin_output = b }\n}\nsink { K {} }");
    assert!(e.contains("unknown table 'b'"), "{e}");
}

#[test]
fn duplicate_output_tables_and_bad_parallelism_are_errors() {
    let e = err("source {\n  S { plugin_output = a }\n  T { plugin_output = a }\n}\nsink { K {} }");
    assert_eq!(e, "job.conf:3: source T: option 'plugin_output': table 'a' is already the output of source S (give each plugin its own output table name)");
    let e = err("source {\n  S {\n    parallelism = 0\n  }\n}\nsink { K {} }");
    assert_eq!(
        e,
        "job.conf:3: source S: option 'parallelism': must be at least 1"
    );
}

#[test]
fn plugin_option_errors_carry_lines() {
    let job = parse("source {\n  S {\n    row {\n      num = many\n    }\n  }\n}\nsink { K {} }")
        .unwrap();
    let mut o = job.sources[0].options.clone();
    assert_eq!(
        o.i64("row.num").unwrap_err().to_string(),
        "job.conf:4: source S: option 'row.num': expected a whole number, found 'many'"
    );
}

#[test]
fn unreadable_job_file_names_the_path() {
    let e = load_job(Path::new("/nonexistent/ferry/job.conf"), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/ferry/job.conf: cannot read the job file"),
        "{e}"
    );
}

#[test]
fn byte_order_mark_and_crlf_line_ends() {
    let text = "\u{feff}source {\r\n  S { a = 1 }\r\n  S { a = 2 }\r\n}\r\nsink { K {} }\r\n";
    let job = parse(text).unwrap();
    assert_eq!(job.sources.len(), 2);
    assert_eq!(raw(&job.sources[1], "a"), json!(2));
    assert_eq!(job.sources[1].options.location().line, Some(3));
}

#[test]
fn substitution_cycles_are_errors_with_a_line() {
    let e =
        err("source {\n  S {\n    a = ${source.S.b}\n    b = ${source.S.a}\n  }\n}\nsink { K {} }");
    assert!(e.starts_with("job.conf:"), "{e}");
    assert!(e.contains("source.S"), "{e}");
}
