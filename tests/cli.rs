//! End-to-end tests of the `ferry` command: good runs, and each kind of bad input with
//! its exact message.

mod common;

use std::path::Path;

use common::ferry;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write job file");
    p
}

fn run(job: &Path, extra: &[&str]) -> (bool, String, String) {
    let out = ferry()
        .arg("run")
        .arg(job)
        .args(extra)
        .output()
        .expect("ferry runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

const GOOD: &str = r#"
env { job.mode = "BATCH" }
source {
  FakeSource {
    plugin_output = "fake"
    row.num = 20
    schema = { fields { id = int, name = string } }
  }
}
sink {
  Assert {
    plugin_input = "fake"
    rules { row_rules = [{ rule_type = MIN_ROW, rule_value = 20 }, { rule_type = MAX_ROW, rule_value = 20 }] }
  }
}
"#;

#[test]
fn a_good_job_exits_zero_with_a_summary_line() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(dir.path(), "good.conf", GOOD);
    let (ok, _, err) = run(&job, &[]);
    assert!(ok, "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("ferry: job 'ferry' finished in "), "{err}");
    assert!(
        last.contains("read 20 [fake=20], wrote [Assert=20]"),
        "{err}"
    );
}

#[test]
fn check_prints_the_plan_without_running() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(dir.path(), "good.conf", GOOD);
    let out = ferry().arg("check").arg(&job).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("source FakeSource (parallelism 1) -> fake"),
        "{text}"
    );
    assert!(text.contains("table fake: id int, name string"), "{text}");
    assert!(
        text.contains("sink Assert (parallelism 1) <- fake"),
        "{text}"
    );
}

#[test]
fn a_syntax_error_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(
        dir.path(),
        "bad.conf",
        "env {\n  job.mode = \"BATCH\"\n}\nsource {\n  FakeSource {\n    row.num = [1, 2\n  }\n}\n",
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(!ok);
    let expected = format!(
        "error: {}:7: syntax error at column 3: expected value",
        job.display()
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
}

#[test]
fn an_unknown_option_names_line_plugin_option_and_nearest_name() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(
        dir.path(),
        "typo.conf",
        "env { job.mode = BATCH }\nsource {\n  FakeSource {\n    row.nmu = 5\n    schema = { fields { id = int } }\n  }\n}\nsink { Console {} }\n",
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(!ok);
    assert!(
        err.contains(&format!("error: {}:4: source FakeSource: option 'row.nmu': unknown option (did you mean 'row.num'?", job.display())),
        "{err}"
    );
}

#[test]
fn an_unknown_connector_lists_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(dir.path(), "unknown.conf", "source {\n  FakeSorce {\n    schema = { fields { id = int } }\n  }\n}\nsink { Console {} }\n");
    let (ok, _, err) = run(&job, &[]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "error: {}:2: unknown source plugin 'FakeSorce' (did you mean 'FakeSource'?",
            job.display()
        )),
        "{err}"
    );
}

#[test]
fn a_missing_input_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir");
    let job = write(
        dir.path(),
        "missing.conf",
        &format!(
            "source {{\n  LocalFile {{\n    path = \"{}\"\n    file_format_type = \"json\"\n    schema = {{ fields {{ id = int }} }}\n  }}\n}}\nsink {{ Console {{}} }}\n",
            missing.display()
        ),
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(!ok);
    let expected = format!(
        "error: {}:2: source LocalFile: path '{}' cannot be read: No such file or directory (os error 2)",
        job.display(),
        missing.display()
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
}

#[test]
fn a_broken_assert_rule_fails_the_job_naming_rule_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(
        dir.path(),
        "assert.conf",
        r#"
source {
  FakeSource {
    plugin_output = "fake"
    rows = [{ kind = INSERT, fields = [1, "a"] }, { kind = INSERT, fields = [12, "b"] }]
    schema = { fields { age = int, name = string } }
  }
}
sink {
  Assert {
    rules { field_rules = [{ field_name = age, field_type = int, field_value = [{ rule_type = MAX, rule_value = 10 }] }] }
  }
}
"#,
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(!ok, "{err}");
    assert!(
        err.lines().any(|l| l
            == "error: Assert: field 'age' rule MAX 10 broken by value 12 (row 2 of table fake)"),
        "{err}"
    );
}

#[test]
fn variables_fill_the_job_file() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(
        dir.path(),
        "vars.conf",
        "source {\n  FakeSource {\n    plugin_output = \"${name:t}\"\n    row.num = ${rows}\n    schema = { fields { id = int } }\n  }\n}\nsink {\n  Assert {\n    rules { row_rules = [{ rule_type = MIN_ROW, rule_value = 7 }, { rule_type = MAX_ROW, rule_value = 7 }] }\n  }\n}\n",
    );
    let (ok, _, err) = run(&job, &["-i", "rows=7"]);
    assert!(ok, "{err}");
    assert!(err.contains("[t=7]"), "{err}");
}

#[test]
fn a_missing_variable_names_itself_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    for (name, value) in [("bare.conf", "${rows}"), ("quoted.conf", "\"${rows}\"")] {
        let job = write(
            dir.path(),
            name,
            &format!("source {{\n  FakeSource {{\n    plugin_output = \"${{name:t}}\"\n    row.num = {value}\n    schema = {{ fields {{ id = int }} }}\n  }}\n}}\nsink {{ Console {{}} }}\n"),
        );
        let (ok, _, err) = run(&job, &[]);
        assert!(!ok, "{name}: {err}");
        assert!(
            err.contains(&format!(
                "{name}:4: source FakeSource: option 'row.num': variable 'rows' is not set (pass -i rows=VALUE)"
            )),
            "{name}: {err}"
        );
    }
}

#[test]
fn connector_placeholders_are_no_missing_variables() {
    // `${table_name}` in the path and `${transactionId}`, `${now}`, `${uuid}` in the file
    // name are filled in by the sink, not from `-i`.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let job = write(
        dir.path(),
        "placeholders.conf",
        &format!(
            "source {{\n  FakeSource {{\n    plugin_output = \"fake\"\n    row.num = 3\n    schema = {{ fields {{ id = int }} }}\n  }}\n}}\nsink {{\n  LocalFile {{\n    path = \"{}/${{table_name}}\"\n    file_format_type = \"json\"\n    custom_filename = true\n    file_name_expression = \"${{transactionId}}_${{now}}_${{uuid}}\"\n  }}\n}}\n",
            out.display()
        ),
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(ok, "{err}");
    let files: Vec<_> = std::fs::read_dir(out.join("fake"))
        .expect("the sink wrote into the table's directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(!files.is_empty(), "{err}");
    assert!(files.iter().all(|n| !n.contains("${")), "{files:?}");
}

#[test]
fn secrets_never_appear_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(
        dir.path(),
        "secret.conf",
        "source {\n  FakeSource {\n    password = \"hunter2\"\n    schema = { fields { id = int } }\n  }\n}\nsink { Console {} }\n",
    );
    let (ok, out, err) = run(&job, &[]);
    assert!(!ok);
    assert!(
        !err.contains("hunter2") && !out.contains("hunter2"),
        "{err}"
    );
}

#[test]
fn connectors_lists_plugins_and_their_options() {
    let out = ferry().arg("connectors").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "FakeSource",
        "LocalFile",
        "Assert",
        "Console",
        "Blackhole",
        "Copy",
        "Filter",
        "FieldMapper",
        "Replace",
        "Split",
        "FilterRowKind",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    let out = ferry().args(["connectors", "fakesource"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("row.num"), "{text}");
    let out = ferry().args(["connectors", "Nope"]).output().unwrap();
    assert!(!out.status.success());
}

/// Logs written to a pipe (or a file) carry no terminal colour codes: colour only when
/// stderr is a terminal (and `NO_COLOR` is unset, which a unit test of the decision covers).
#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    // An unknown env key is kept, with a warning: a log line.
    let job = write(
        dir.path(),
        "warn.conf",
        &GOOD.replace(
            "env { job.mode = \"BATCH\" }",
            "env { job.mode = \"BATCH\", my.own.key = 1 }",
        ),
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(ok, "{err}");
    assert!(
        err.contains("unknown key 'my.own.key'"),
        "no warning: {err}"
    );
    assert!(!err.contains('\x1b'), "colour codes in piped logs: {err:?}");
}

fn run_args(args: &[&str]) -> (bool, String) {
    let out = ferry().args(args).output().expect("ferry runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// SeaTunnel's command line carries over: `seatunnel.sh --config job.conf -m local -i k=v`.
#[test]
fn seatunnel_flags_name_the_job_file_and_the_master() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(dir.path(), "good.conf", GOOD);
    let job = job.to_str().unwrap();
    for args in [
        vec!["run", "-c", job, "-m", "local", "-i", "unused=1"],
        vec!["run", "--config", job, "--master", "local"],
        vec!["run", job],
    ] {
        let (ok, err) = run_args(&args);
        assert!(ok, "{args:?}: {err}");
        assert!(err.contains("read 20 [fake=20]"), "{args:?}: {err}");
    }
    let out = ferry().args(["check", "-c", job]).output().unwrap();
    assert!(out.status.success());

    // SeaTunnel's default, submitting to its cluster: run here, and say so.
    let (ok, err) = run_args(&["run", "-c", job, "-m", "cluster"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("-m cluster: Ferry has no SeaTunnel cluster to submit to; running the job on the embedded engine"),
        "{err}"
    );
}

#[test]
fn a_job_file_given_twice_or_a_spark_master_without_spark_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(dir.path(), "good.conf", GOOD);
    let job = job.to_str().unwrap();
    let (ok, err) = run_args(&["run", job, "-c", job]);
    assert!(!ok);
    assert!(
        err.contains("the argument '[JOB]' cannot be used with '--config <FILE>'"),
        "{err}"
    );
    let (ok, err) = run_args(&["run"]);
    assert!(!ok);
    assert!(err.contains("<JOB|--config <FILE>>"), "{err}");
    let (ok, err) = run_args(&["run", "-c", job, "-m", "spark://h:7077"]);
    assert!(!ok);
    assert!(
        err.contains("error: -m/--master 'spark://h:7077': the embedded engine takes `local` (or SeaTunnel's `cluster`); for a Spark master URL add --engine spark"),
        "{err}"
    );
    let (ok, err) = run_args(&["run", "-c", job, "--engine", "spark", "-m", "cluster"]);
    assert!(!ok);
    assert!(err.contains("-m cluster"), "{err}");
}

#[test]
fn a_primary_key_over_a_missing_column_is_refused_naming_key_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let job = write(
        dir.path(),
        "pk.conf",
        "env { job.mode = BATCH }\nsource {\n  FakeSource {\n    plugin_output = fake\n    schema = {\n      fields { id = int }\n      primaryKey { name = pk, columnNames = [idd] }\n    }\n  }\n}\nsink { Console {} }\n",
    );
    let (ok, _, err) = run(&job, &[]);
    assert!(!ok);
    assert!(
        err.contains("source FakeSource: option 'schema'")
            && err.contains(
                "table fake: primary key 'pk' names column 'idd', which the table does not have"
            ),
        "{err}"
    );
}
