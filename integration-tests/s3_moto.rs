//! lakejoin tables on S3, against moto's S3 server: create, write, scan, point lookups,
//! compaction and the create-if-absent snapshot publish through object_store's S3 client.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use support::moto::Moto;

fn lakejoin(endpoint: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lakejoin"));
    cmd.args(args)
        .args([
            "--store-option",
            &format!("aws_endpoint={endpoint}"),
            "--store-option",
            "aws_allow_http=true",
            "--store-option",
            "aws_access_key_id=test",
            "--store-option",
            "aws_secret_access_key=test",
            "--store-option",
            "aws_region=us-east-1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "lakejoin failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn tables_on_s3_round_trip() {
    let moto = Moto::start();
    moto.create_bucket("lake");
    let wh = "s3://lake/warehouse";
    let loc = ["--warehouse", wh, "--table", "shop.customers"];
    let ep = moto.endpoint.as_str();
    ok(lakejoin(
        ep,
        &[
            &["table", "create"][..],
            &loc[..],
            &[
                "--column",
                "id:INT",
                "--column",
                "name:STRING",
                "--column",
                "dt:STRING",
                "--primary-key",
                "id,dt",
                "--partition-by",
                "dt",
                "--buckets",
                "2",
            ][..],
        ]
        .concat(),
        None,
    ));
    let again = lakejoin(
        ep,
        &[
            &["table", "create"][..],
            &loc[..],
            &[
                "--column",
                "id:INT",
                "--column",
                "dt:STRING",
                "--primary-key",
                "id,dt",
                "--buckets",
                "2",
            ][..],
        ]
        .concat(),
        None,
    );
    assert!(
        !again.status.success(),
        "creating the table twice must fail"
    );
    let rows = "{\"id\":1,\"name\":\"ada\",\"dt\":\"a/b\"}\n{\"id\":2,\"name\":\"bob\",\"dt\":\"2024-01-01\"}\n";
    ok(lakejoin(
        ep,
        &[&["table", "write"][..], &loc[..]].concat(),
        Some(rows),
    ));
    ok(lakejoin(
        ep,
        &[
            &["table", "write"][..],
            &loc[..],
            &["--row-kind-field", "op"][..],
        ]
        .concat(),
        Some(
            "{\"id\":2,\"dt\":\"2024-01-01\",\"op\":\"-D\"}\n{\"id\":3,\"name\":\"cy\",\"dt\":\"a/b\"}\n",
        ),
    ));
    let scanned = ok(lakejoin(
        ep,
        &[&["table", "scan"][..], &loc[..]].concat(),
        None,
    ));
    assert_eq!(
        scanned,
        "{\"id\":1,\"name\":\"ada\",\"dt\":\"a/b\"}\n{\"id\":3,\"name\":\"cy\",\"dt\":\"a/b\"}\n"
    );
    let got = ok(lakejoin(
        ep,
        &[
            &["table", "get"][..],
            &loc[..],
            &["--key", "{\"id\":3,\"dt\":\"a/b\"}"][..],
        ]
        .concat(),
        None,
    ));
    assert_eq!(got, "{\"id\":3,\"name\":\"cy\",\"dt\":\"a/b\"}\n");
    let absent = lakejoin(
        ep,
        &[
            &["table", "get"][..],
            &loc[..],
            &["--key", "{\"id\":2,\"dt\":\"2024-01-01\"}"][..],
        ]
        .concat(),
        None,
    );
    assert_eq!(absent.status.code(), Some(1), "a deleted key is absent");
    ok(lakejoin(
        ep,
        &[&["table", "compact"][..], &loc[..], &["--full"][..]].concat(),
        None,
    ));
    assert_eq!(
        ok(lakejoin(
            ep,
            &[&["table", "scan"][..], &loc[..]].concat(),
            None
        )),
        scanned
    );
    let snapshots = ok(lakejoin(
        ep,
        &[&["table", "snapshots"][..], &loc[..]].concat(),
        None,
    ));
    let kinds: Vec<String> = snapshots
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["commitKind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["APPEND", "APPEND", "COMPACT"]);
}
