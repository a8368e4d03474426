//! Power loss on a local warehouse: every file a snapshot names reaches the disk before
//! the snapshot does.
//!
//! A host crash loses what the kernel had not yet written back. A snapshot that survives
//! while a data file or manifest it names does not is a broken table, and since CDC
//! snapshots carry the Kafka offsets they cover, those changes are never read again.
//! Crashing a host is not possible here, so this checks the system calls that make the
//! guarantee: the real `lakejoin` binary writes and compacts a table under `strace`, and
//! for each new snapshot every file it names that the command created was fsynced (its
//! staging file `<name>#<n>`), renamed into place, and its directory fsynced, all before
//! the snapshot file was linked into place; the snapshot itself is synced the same way.
//!
//! Needs `strace` (scripts/test.sh installs Debian's package when it is missing).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use lakejoin::table::{Table, TableIdentifier, Warehouse};

const TABLE: &str = "db.t";

/// One completed system call of interest, in completion order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    /// fsync/fdatasync of this path (a file or a directory).
    Sync(String),
    /// rename or link of a staging file onto its final name.
    Publish { from: String, to: String },
}

/// Parses `strace -f -y` output. With several threads a call may be split into
/// `<unfinished ...>` and `<... name resumed>` lines; it counts when it completes.
fn parse_trace(text: &str) -> Vec<Call> {
    let mut pending: BTreeMap<String, String> = BTreeMap::new();
    let mut calls = Vec::new();
    for line in text.lines() {
        let (pid, rest) = line.split_once(' ').unwrap_or(("", line));
        let rest = rest.trim_start();
        let whole = if let Some(start) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid.to_string(), start.to_string());
            continue;
        } else if rest.starts_with("<... ") {
            let Some(start) = pending.remove(pid) else {
                continue;
            };
            let tail = rest.split_once("resumed>").map_or("", |(_, t)| t);
            format!("{start}{tail}")
        } else {
            rest.to_string()
        };
        // Only calls that succeeded.
        if !whole.trim_end().ends_with("= 0") {
            continue;
        }
        let name = whole.split('(').next().unwrap_or("");
        let args = whole
            .split_once('(')
            .map_or("", |(_, a)| a)
            .rsplit_once(')')
            .map_or("", |(a, _)| a);
        match name {
            "fsync" | "fdatasync" => {
                // 7</tmp/…/file#1>
                if let Some(path) = args.split_once('<').and_then(|(_, p)| p.strip_suffix('>')) {
                    calls.push(Call::Sync(path.to_string()));
                }
            }
            "rename" | "renameat" | "renameat2" | "link" | "linkat" => {
                let quoted: Vec<&str> = args.split('"').skip(1).step_by(2).collect();
                if let [from, to, ..] = quoted[..] {
                    calls.push(Call::Publish {
                        from: from.to_string(),
                        to: to.to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    calls
}

fn strace() -> PathBuf {
    let candidates = [
        std::env::var_os("LAKEJOIN_STRACE").map(PathBuf::from),
        Some(PathBuf::from("/usr/bin/strace")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.exists())
        .expect(
            "no strace: run scripts/test.sh (it installs Debian's strace) or set LAKEJOIN_STRACE",
        )
}

/// Runs `lakejoin table <args…>` on the warehouse under strace; returns its calls.
fn traced(warehouse: &Path, args: &[&str], stdin: &str, trace: &Path) -> Vec<Call> {
    let mut child = Command::new(strace())
        .args(["-f", "-y", "-qq", "-o"])
        .arg(trace)
        .args([
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat",
        ])
        .arg(env!("CARGO_BIN_EXE_lakejoin"))
        .arg("table")
        .arg(args[0])
        .arg("--warehouse")
        .arg(warehouse)
        .arg("--table")
        .arg(TABLE)
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting strace");
    {
        use std::io::Write;
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("waiting for lakejoin");
    assert!(
        out.status.success(),
        "lakejoin table {}: {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    parse_trace(&std::fs::read_to_string(trace).expect("trace"))
}

fn parent(path: &str) -> String {
    Path::new(path)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Position of the completed publish of `path`, with the positions of its staging
/// file's sync before it and its directory's sync after it; `None` when the command
/// did not create `path`.
fn durable_at(calls: &[Call], path: &str) -> Option<(usize, Option<usize>, Option<usize>)> {
    let published = calls
        .iter()
        .position(|c| matches!(c, Call::Publish { to, .. } if to == path))?;
    let Call::Publish { from, .. } = &calls[published] else {
        return None;
    };
    let synced = calls[..published]
        .iter()
        .rposition(|c| *c == Call::Sync(from.clone()));
    let dir = parent(path);
    let dir_synced = calls[published..]
        .iter()
        .position(|c| *c == Call::Sync(dir.clone()))
        .map(|i| published + i);
    Some((published, synced, dir_synced))
}

/// Checks the newest snapshot: each file it names that this command created was made
/// durable before the snapshot was published. Returns how many such files there were.
async fn check_newest_snapshot(warehouse: &Path, calls: &[Call]) -> BTreeMap<&'static str, usize> {
    let wh = Warehouse::from_uri(warehouse.to_str().expect("utf-8"), &BTreeMap::new())
        .expect("warehouse");
    let table = Table::open(&wh, &TableIdentifier::parse(TABLE).expect("id"))
        .await
        .expect("table");
    let snapshot = table
        .latest_snapshot()
        .await
        .expect("read")
        .expect("a snapshot");
    let dir = warehouse.join("db.db/t");
    let snapshot_file = dir.join(format!("snapshot/snapshot-{}", snapshot.id));
    let snapshot_file = snapshot_file.to_string_lossy().into_owned();
    let (snapshot_at, snapshot_synced, snapshot_dir_synced) =
        durable_at(calls, &snapshot_file).expect("the command published the snapshot");
    assert!(
        snapshot_synced.is_some(),
        "{snapshot_file} was not fsynced before it was linked"
    );
    assert!(
        snapshot_dir_synced.is_some(),
        "the snapshot directory was not fsynced after {snapshot_file} was linked"
    );

    let mut named: Vec<(&'static str, String)> = Vec::new();
    let manifest = |name: &str| {
        dir.join("manifest")
            .join(name)
            .to_string_lossy()
            .into_owned()
    };
    named.push(("manifest list", manifest(&snapshot.base_manifest_list)));
    named.push(("manifest list", manifest(&snapshot.delta_manifest_list)));
    let mut manifests = BTreeSet::new();
    for meta in table
        .snapshot_manifests(&snapshot)
        .await
        .expect("manifests")
    {
        manifests.insert(meta.file_name.clone());
        named.push(("manifest", manifest(&meta.file_name)));
    }
    for name in &manifests {
        for entry in table.read_manifest(name).await.expect("manifest") {
            let location = table.data_file_path(&entry).expect("data file path");
            named.push((
                "data file",
                warehouse
                    .join(location.as_ref())
                    .to_string_lossy()
                    .into_owned(),
            ));
        }
    }
    let mut created = BTreeMap::new();
    for (kind, path) in named {
        let Some((published, synced, dir_synced)) = durable_at(calls, &path) else {
            continue;
        };
        *created.entry(kind).or_insert(0) += 1;
        assert!(
            synced.is_some(),
            "{kind} {path} was published without an fsync of its contents"
        );
        assert!(
            published < snapshot_at,
            "{kind} {path} was put in place after the snapshot naming it"
        );
        assert!(
            dir_synced.is_some_and(|at| at < snapshot_at),
            "{kind} {path}: its directory was not fsynced before snapshot {} was published",
            snapshot.id
        );
    }
    created
}

fn rows(from: i64, count: i64) -> String {
    (from..from + count)
        .map(|i| format!("{{\"id\":{i},\"name\":\"n{i}\",\"p\":\"{}\"}}\n", i % 2))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_a_snapshot_names_is_durable_before_the_snapshot() {
    let temp = tempfile::tempdir().expect("tempdir");
    let warehouse = temp.path().join("wh");
    std::fs::create_dir_all(&warehouse).expect("mkdir");
    let warehouse = warehouse.canonicalize().expect("canonical");
    let trace = temp.path().join("trace.txt");
    traced(
        &warehouse,
        &[
            "create",
            "--column",
            "id:INT NOT NULL",
            "--column",
            "name:STRING",
            "--column",
            "p:STRING NOT NULL",
            "--primary-key",
            "id,p",
            "--partition-by",
            "p",
            "--buckets",
            "2",
        ],
        "",
        &trace,
    );
    for round in 0..2 {
        let calls = traced(&warehouse, &["write"], &rows(round * 50, 100), &trace);
        let created = check_newest_snapshot(&warehouse, &calls).await;
        assert!(
            created.get("data file").copied().unwrap_or(0) >= 2,
            "{created:?}"
        );
        assert!(
            created.get("manifest").copied().unwrap_or(0) >= 1,
            "{created:?}"
        );
        assert_eq!(created.get("manifest list"), Some(&2), "{created:?}");
    }
    let calls = traced(&warehouse, &["compact", "--full"], "", &trace);
    let created = check_newest_snapshot(&warehouse, &calls).await;
    assert!(
        created.get("data file").copied().unwrap_or(0) >= 2,
        "{created:?}"
    );
}

#[test]
fn the_trace_parser_joins_split_calls() {
    let text = "\
10 fsync(7</w/a#1> <unfinished ...>
11 linkat(AT_FDCWD, \"/w/s#1\", AT_FDCWD, \"/w/s\", 0) = 0
10 <... fsync resumed>) = 0
10 renameat2(AT_FDCWD, \"/w/a#1\", AT_FDCWD, \"/w/a\", 0) = 0
10 fsync(8</w>) = 0
10 fsync(9</w/b#1>) = -1 EIO (Input/output error)
";
    assert_eq!(
        parse_trace(text),
        vec![
            Call::Publish {
                from: "/w/s#1".into(),
                to: "/w/s".into()
            },
            Call::Sync("/w/a#1".into()),
            Call::Publish {
                from: "/w/a#1".into(),
                to: "/w/a".into()
            },
            Call::Sync("/w".into()),
        ]
    );
}
