//! `docker/docker-compose.yml` and `docker/Dockerfile` agree with each other and with the
//! `connectors.toml` they mount: these machines have no Docker engine, so this is the
//! check we can run. The compose file is parsed by the venv's PyYAML (no YAML parser
//! among the crate's dependencies); the config by lakejoin itself, with the environment
//! the container would have (the image's `ENV` plus the service's `environment`).

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::debezium::{parse_properties, readme_block};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The compose file as JSON, through PyYAML's `safe_load`.
fn compose() -> Value {
    let path = repo().join("docker/docker-compose.yml");
    let mut command = Command::new(support::python());
    command
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)",
        ])
        .arg(&path)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let output = support::run(command, "");
    assert!(
        output.status.success(),
        "PyYAML could not parse {}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("PyYAML printed JSON")
}

/// One build stage of a Dockerfile: its name and instructions (keyword, arguments), with
/// line continuations joined and comments dropped.
#[derive(Debug)]
struct Stage {
    name: Option<String>,
    instructions: Vec<(String, String)>,
}

impl Stage {
    fn all(&self, keyword: &str) -> Vec<&str> {
        self.instructions
            .iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, args)| args.as_str())
            .collect()
    }

    /// The last instruction `keyword` (the one that counts for CMD, ENTRYPOINT, USER …).
    fn last(&self, keyword: &str) -> &str {
        self.all(keyword)
            .last()
            .copied()
            .unwrap_or_else(|| panic!("stage {:?} has no {keyword}", self.name))
    }
}

fn dockerfile() -> Vec<Stage> {
    let text = std::fs::read_to_string(repo().join("docker/Dockerfile")).expect("Dockerfile");
    let mut stages: Vec<Stage> = Vec::new();
    let mut logical = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && logical.is_empty()) {
            continue;
        }
        if let Some(continued) = trimmed.strip_suffix('\\') {
            logical.push_str(continued);
            logical.push(' ');
            continue;
        }
        logical.push_str(trimmed);
        let instruction = std::mem::take(&mut logical);
        let (keyword, args) = instruction
            .split_once(char::is_whitespace)
            .unwrap_or((&instruction, ""));
        let keyword = keyword.to_ascii_uppercase();
        let args = args.trim().to_owned();
        if keyword == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some((*name).to_owned()),
                _ => None,
            };
            stages.push(Stage {
                name,
                instructions: Vec::new(),
            });
        } else {
            stages
                .last_mut()
                .expect("an instruction before FROM")
                .instructions
                .push((keyword, args));
        }
    }
    stages
}

/// An exec-form argument list (`["a", "b"]`).
fn exec_form(args: &str) -> Vec<String> {
    serde_json::from_str(args).unwrap_or_else(|e| panic!("not exec form: {args}: {e}"))
}

fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
}

/// A service's `environment` as a map (mapping or `KEY=value` list form).
fn environment(service: &Value) -> BTreeMap<String, String> {
    match &service["environment"] {
        Value::Null => BTreeMap::new(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                let (k, v) = str_of(item, "environment entry")
                    .split_once('=')
                    .expect("KEY=value");
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        other => panic!("environment is neither a mapping nor a list: {other}"),
    }
}

/// `ENV KEY=value …` of a stage.
fn image_env(stage: &Stage) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for args in stage.all("ENV") {
        for pair in args.split_whitespace() {
            let (k, v) = pair.split_once('=').expect("ENV KEY=value");
            env.insert(k.to_owned(), v.trim_matches('"').to_owned());
        }
    }
    env
}

/// Listener name → `host:port` of a Kafka `*_LISTENERS` value (`NAME://host:port,…`).
fn listeners(value: &str) -> BTreeMap<String, String> {
    value
        .split(',')
        .map(|l| {
            let (name, address) = l.split_once("://").expect("NAME://host:port");
            (name.trim().to_owned(), address.trim().to_owned())
        })
        .collect()
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {address}"))
}

/// Container ports published by a service (`"host:container"` short syntax).
fn published(service: &Value) -> Vec<(u16, u16)> {
    service["ports"]
        .as_array()
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let text = str_of(p, "port");
                    let parts: Vec<&str> = text.split(':').collect();
                    let container = parts.last().expect("a port").parse().expect("a number");
                    let host = parts[parts.len().saturating_sub(2)]
                        .parse()
                        .expect("a number");
                    (host, container)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A compose duration such as `45s`, `1m30s`.
fn compose_duration(text: &str) -> Duration {
    let mut total = Duration::ZERO;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
        } else {
            let n: u64 = number.parse().expect("a number before the unit");
            number.clear();
            total += match c {
                'h' => Duration::from_secs(n * 3600),
                'm' => Duration::from_secs(n * 60),
                's' => Duration::from_secs(n),
                other => panic!("unit {other} in {text}"),
            };
        }
    }
    total
}

#[test]
fn compose_file_dockerfile_and_mounted_config_agree() {
    let compose = compose();
    let services = &compose["services"];
    let (kafka, lakejoin, tests) = (
        &services["kafka"],
        &services["lakejoin"],
        &services["tests"],
    );
    for (name, service) in [("kafka", kafka), ("lakejoin", lakejoin), ("tests", tests)] {
        assert!(service.is_object(), "no service {name} in {compose}");
    }
    let stages = dockerfile();
    let runtime = stages.last().expect("stages");

    // Kafka: the official image, one KRaft node that is broker and controller.
    let image = str_of(&kafka["image"], "kafka image");
    assert!(image.starts_with("apache/kafka:"), "{image}");
    assert!(
        !image.ends_with(":latest"),
        "pin the Kafka version: {image}"
    );
    let kafka_env = environment(kafka);
    let roles: Vec<&str> = kafka_env["KAFKA_PROCESS_ROLES"].split(',').collect();
    assert!(
        roles.contains(&"broker") && roles.contains(&"controller"),
        "{roles:?}"
    );
    let node = &kafka_env["KAFKA_NODE_ID"];
    let voters = &kafka_env["KAFKA_CONTROLLER_QUORUM_VOTERS"];
    let controllers = listeners(&kafka_env["KAFKA_LISTENERS"]);
    let controller_name = &kafka_env["KAFKA_CONTROLLER_LISTENER_NAMES"];
    assert_eq!(
        voters,
        &format!(
            "{node}@kafka:{}",
            port_of(&controllers[controller_name.as_str()])
        ),
        "a single voter: this node's controller listener"
    );
    let advertised = listeners(&kafka_env["KAFKA_ADVERTISED_LISTENERS"]);
    for (name, address) in &advertised {
        assert_eq!(
            port_of(address),
            port_of(&controllers[name.as_str()]),
            "advertised listener {name} must be one the broker listens on"
        );
    }
    assert!(
        kafka["healthcheck"]["test"].is_array(),
        "kafka needs a healthcheck"
    );
    // The host-facing listener is published, so tests on the host can use it.
    let kafka_ports = published(kafka);
    for address in advertised.values().filter(|a| a.starts_with("localhost:")) {
        let port = port_of(address);
        assert!(
            kafka_ports.contains(&(port, port)),
            "{address} is advertised but port {port} is not published: {kafka_ports:?}"
        );
    }
    let in_network = |bootstrap: &str| {
        let (host, _) = bootstrap.rsplit_once(':').expect("host:port");
        host == "kafka"
            && advertised
                .iter()
                .any(|(name, a)| a == bootstrap && name != controller_name)
    };

    // The image: non-root, `lakejoin run -c <config>`, a health check through
    // `lakejoin health` on the same config, the warehouse volume.
    assert_eq!(runtime.name.as_deref(), Some("runtime"));
    assert_eq!(exec_form(runtime.last("ENTRYPOINT")), ["lakejoin"]);
    let cmd = exec_form(runtime.last("CMD"));
    assert_eq!(cmd[..2], ["run", "-c"], "{cmd:?}");
    let config_path = cmd[2].clone();
    let user = runtime.last("USER");
    assert!(user != "root" && user != "0", "runs as {user}");
    let healthcheck = runtime.last("HEALTHCHECK");
    let probe = exec_form(&healthcheck[healthcheck.find("CMD").expect("CMD") + 3..]);
    assert_eq!(probe, ["lakejoin", "health", "-c", config_path.as_str()]);
    let volumes: Vec<String> = runtime
        .all("VOLUME")
        .iter()
        .flat_map(|v| exec_form(v))
        .collect();

    // lakejoin: built from the runtime stage, with the repository's connectors.toml
    // mounted where the image's CMD reads it.
    let build = &lakejoin["build"];
    assert_eq!(build["dockerfile"], "docker/Dockerfile");
    assert_eq!(build["target"], "runtime");
    let context = repo()
        .join("docker")
        .join(str_of(&build["context"], "context"));
    assert_eq!(
        context.canonicalize().expect("context"),
        repo().canonicalize().expect("repo")
    );
    let mounts = lakejoin["volumes"].as_array().expect("lakejoin volumes");
    let config_mount = mounts
        .iter()
        .find(|m| m["target"] == config_path.as_str())
        .unwrap_or_else(|| panic!("nothing mounted at {config_path}: {mounts:?}"));
    assert_eq!(config_mount["type"], "bind");
    assert_eq!(config_mount["read_only"], true);
    let mounted = repo()
        .join("docker")
        .join(str_of(&config_mount["source"], "source"));
    assert_eq!(
        mounted.canonicalize().expect("mounted config exists"),
        repo()
            .join("connectors.toml")
            .canonicalize()
            .expect("repo config")
    );

    // The mounted config with the container's environment.
    let mut container_env = image_env(runtime);
    container_env.extend(environment(lakejoin));
    let mut env = config::Map::new();
    for (k, v) in container_env
        .iter()
        .filter(|(k, _)| k.starts_with("LAKEJOIN__"))
    {
        env.insert(k.clone(), v.clone());
    }
    let config = lakejoin::config::load_with_env(Path::new(&mounted), Some(env))
        .unwrap_or_else(|e| panic!("the mounted config with the container's environment: {e}"));
    assert!(
        in_network(&config.kafka.bootstrap_servers),
        "bootstrap {} is not the kafka service's in-network advertised listener ({advertised:?})",
        config.kafka.bootstrap_servers
    );
    let listen: SocketAddr = config.observe.listen_address().expect("observe.listen");
    assert!(
        listen.ip().is_unspecified(),
        "the endpoint listens on {listen}: unreachable from outside the container"
    );
    assert!(
        published(lakejoin).iter().any(|(_, c)| *c == listen.port()),
        "observe port {} is not published: {:?}",
        listen.port(),
        published(lakejoin)
    );
    assert!(
        runtime
            .all("EXPOSE")
            .iter()
            .any(|e| e.split_whitespace().any(|p| p == listen.port().to_string())),
        "the image does not EXPOSE {}",
        listen.port()
    );
    let warehouse = config
        .warehouse
        .uri
        .strip_prefix("file://")
        .unwrap_or_else(|| panic!("warehouse {} is not a local path", config.warehouse.uri));
    assert!(
        volumes.iter().any(|v| v == warehouse),
        "the image's VOLUME {volumes:?} is not the warehouse {warehouse}"
    );
    let warehouse_mount = mounts
        .iter()
        .find(|m| m["target"] == warehouse)
        .unwrap_or_else(|| panic!("no volume mounted at the warehouse {warehouse}"));
    assert_eq!(warehouse_mount["type"], "volume");
    let volume = str_of(&warehouse_mount["source"], "volume");
    assert!(
        compose["volumes"].get(volume).is_some(),
        "volume {volume} is not declared"
    );
    assert_eq!(
        lakejoin["depends_on"]["kafka"]["condition"], "service_healthy",
        "lakejoin waits for a healthy Kafka"
    );
    let grace = compose_duration(str_of(&lakejoin["stop_grace_period"], "stop_grace_period"));
    assert!(
        grace > config.run.shutdown_timeout,
        "stop_grace_period {grace:?} must exceed run.shutdown_timeout {:?}",
        config.run.shutdown_timeout
    );

    // The tests profile: the suite in the image's test stage, against the same Kafka.
    assert_eq!(tests["profiles"], serde_json::json!(["tests"]));
    let target = str_of(&tests["build"]["target"], "tests target");
    assert!(
        stages.iter().any(|s| s.name.as_deref() == Some(target)),
        "no stage {target} in the Dockerfile"
    );
    let tests_env = environment(tests);
    assert_eq!(
        tests_env.get("KAFKA_BOOTSTRAP"),
        Some(&config.kafka.bootstrap_servers),
        "the tests use the broker lakejoin uses"
    );
    assert_eq!(tests["depends_on"]["kafka"]["condition"], "service_healthy");
}

/// The packages a stage's `apt-get install` lines name.
fn apt_packages(stage: &Stage) -> Vec<String> {
    stage
        .all("RUN")
        .iter()
        .flat_map(|run| run.split("&&"))
        .filter_map(|command| {
            command
                .trim()
                .strip_prefix("apt-get install")
                .map(str::to_owned)
        })
        .flat_map(|args| {
            args.split_whitespace()
                .filter(|w| !w.starts_with('-'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The runtime image installs the Debian package of every shared library the binary links
/// (read with `ldd` and `dpkg -S` on this Debian bookworm host, the image's base), and the
/// CA certificates TLS to public endpoints needs; the build stage has the headers. glibc's
/// and libgcc's libraries come with every Debian image.
#[test]
fn the_runtime_image_installs_what_the_binary_links() {
    let stages = dockerfile();
    let runtime = stages.last().expect("stages");
    let installed = apt_packages(runtime);
    assert!(
        installed.iter().any(|p| p == "ca-certificates"),
        "{installed:?}"
    );
    let build = stages
        .iter()
        .find(|s| s.name.as_deref() == Some("build"))
        .expect("a build stage");
    let build_packages = apt_packages(build);
    for headers in ["libssl-dev", "zlib1g-dev", "pkg-config"] {
        assert!(
            build_packages.iter().any(|p| p == headers),
            "the build stage lacks {headers}: {build_packages:?}"
        );
    }

    let ldd = Command::new("ldd")
        .arg(support::lakejoin_bin())
        .output()
        .expect("ldd");
    assert!(ldd.status.success(), "ldd failed");
    let libraries: Vec<String> = String::from_utf8_lossy(&ldd.stdout)
        .lines()
        .filter_map(|l| l.split(" => ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        libraries.iter().any(|l| l.contains("libssl")),
        "the binary is built with TLS (librdkafka over OpenSSL): {libraries:?}"
    );
    for library in libraries {
        // Merged /usr: dpkg may know the file under either path.
        let package = [library.clone(), format!("/usr{library}")]
            .iter()
            .find_map(|path| {
                let dpkg = Command::new("dpkg")
                    .args(["-S", path])
                    .output()
                    .expect("dpkg -S");
                let owner = String::from_utf8_lossy(&dpkg.stdout).into_owned();
                owner
                    .split(':')
                    .next()
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| panic!("no Debian package owns {library}"));
        let package = package.as_str();
        if matches!(package, "libc6" | "libgcc-s1") {
            continue;
        }
        assert!(
            installed.iter().any(|p| p == package),
            "the binary links {library} from {package}, which the runtime stage does not \
             install: {installed:?}"
        );
    }
}

/// The file a bind mount of `service` puts at `target`: its path in the repository.
fn bind_source(service: &Value, target: &str) -> PathBuf {
    let mounts = service["volumes"].as_array().expect("volumes");
    let mount = mounts
        .iter()
        .find(|m| m["target"] == target)
        .unwrap_or_else(|| panic!("nothing mounted at {target}: {mounts:?}"));
    assert_eq!(mount["type"], "bind", "{mount}");
    assert_eq!(mount["read_only"], true, "{mount}");
    repo()
        .join("docker")
        .join(str_of(&mount["source"], "source"))
}

/// The `debezium` profile runs the README's Debezium quick start: the files it mounts are
/// the README's blocks, byte for byte, and the addresses in them are the services'.
#[test]
fn debezium_profile_is_the_readme_quick_start() {
    let compose = compose();
    let services = &compose["services"];
    let (kafka, mariadb, connect, lakejoin) = (
        &services["kafka"],
        &services["mariadb"],
        &services["connect"],
        &services["lakejoin-debezium"],
    );
    for (name, service) in [
        ("mariadb", mariadb),
        ("connect", connect),
        ("lakejoin-debezium", lakejoin),
    ] {
        assert_eq!(
            service["profiles"],
            serde_json::json!(["debezium"]),
            "{name} belongs to the debezium profile only"
        );
        if let Some(image) = service["image"].as_str() {
            assert!(!image.ends_with(":latest"), "pin {name}'s image: {image}");
        }
    }
    let advertised = listeners(&environment(kafka)["KAFKA_ADVERTISED_LISTENERS"]);
    let internal = advertised
        .values()
        .find(|a| a.starts_with("kafka:"))
        .expect("an in-network listener")
        .clone();

    // MariaDB: a ROW binlog with full images, and the README's setup.sql as init script.
    let command: Vec<&str> = mariadb["command"]
        .as_array()
        .expect("mariadb command")
        .iter()
        .map(|a| str_of(a, "argument"))
        .collect();
    for flag in ["--binlog-format=ROW", "--binlog-row-image=FULL"] {
        assert!(command.contains(&flag), "mariadb needs {flag}: {command:?}");
    }
    assert!(
        command.iter().any(|a| a.starts_with("--log-bin")),
        "{command:?}"
    );
    assert!(
        command.iter().any(|a| a.starts_with("--server-id=")),
        "{command:?}"
    );
    let setup = bind_source(mariadb, "/docker-entrypoint-initdb.d/setup.sql");
    assert_eq!(
        std::fs::read_to_string(&setup).expect("setup.sql"),
        readme_block("sql", "-- docker/debezium/setup.sql")
    );
    assert!(
        mariadb["healthcheck"]["test"].is_array(),
        "mariadb needs a healthcheck"
    );

    // The worker: standalone, on the README's two files.
    let image = str_of(&connect["image"], "connect image");
    assert!(image.starts_with("quay.io/debezium/connect:"), "{image}");
    let entrypoint: Vec<&str> = connect["entrypoint"]
        .as_array()
        .expect("entrypoint")
        .iter()
        .map(|a| str_of(a, "entrypoint"))
        .collect();
    assert_eq!(entrypoint, ["/kafka/bin/connect-standalone.sh"]);
    let args: Vec<&str> = connect["command"]
        .as_array()
        .expect("command")
        .iter()
        .map(|a| str_of(a, "argument"))
        .collect();
    assert_eq!(args.len(), 2, "{args:?}");
    let worker_file = bind_source(connect, args[0]);
    let connector_file = bind_source(connect, args[1]);
    let worker_text = std::fs::read_to_string(&worker_file).expect("worker properties");
    let connector_text = std::fs::read_to_string(&connector_file).expect("connector properties");
    assert_eq!(
        worker_text,
        readme_block(
            "properties",
            "# docker/debezium/connect-standalone.properties"
        )
    );
    assert_eq!(
        connector_text,
        readme_block("properties", "# docker/debezium/mariadb-source.properties")
    );
    let worker: BTreeMap<_, _> = parse_properties(&worker_text).into_iter().collect();
    let connector: BTreeMap<_, _> = parse_properties(&connector_text).into_iter().collect();
    assert_eq!(worker["bootstrap.servers"], internal);
    assert_eq!(
        worker["plugin.path"], "/kafka/connect",
        "where the image has Debezium"
    );
    let offsets = &worker["offset.storage.file.filename"];
    let volumes = connect["volumes"].as_array().expect("volumes");
    assert!(
        volumes.iter().any(|m| m["type"] == "volume"
            && offsets.starts_with(&format!("{}/", str_of(&m["target"], "target")))),
        "the worker's offsets {offsets} are on a volume: {volumes:?}"
    );
    assert_eq!(connector["database.hostname"], "mariadb");
    assert_eq!(connector["database.port"], "3306");
    assert_eq!(
        connector["schema.history.internal.kafka.bootstrap.servers"],
        internal
    );
    for service in ["kafka", "mariadb"] {
        assert_eq!(
            connect["depends_on"][service]["condition"], "service_healthy",
            "the worker waits for {service}"
        );
    }

    // lakejoin: the README's connectors.toml, reading the connector's topic.
    let config_path = bind_source(lakejoin, "/etc/lakejoin/connectors.toml");
    assert_eq!(
        std::fs::read_to_string(&config_path).expect("connectors.toml"),
        readme_block("toml", "# docker/debezium/connectors.toml")
    );
    let mut env = config::Map::new();
    for (k, v) in environment(lakejoin)
        .into_iter()
        .filter(|(k, _)| k.starts_with("LAKEJOIN__"))
    {
        env.insert(k, v);
    }
    let config = lakejoin::config::load_with_env(&config_path, Some(env))
        .unwrap_or_else(|e| panic!("docker/debezium/connectors.toml: {e}"));
    assert_eq!(config.kafka.bootstrap_servers, internal);
    let listen: SocketAddr = config.observe.listen_address().expect("observe.listen");
    assert!(listen.ip().is_unspecified(), "{listen}");
    assert!(
        published(lakejoin).iter().any(|(_, c)| *c == listen.port()),
        "observe port {} is not published",
        listen.port()
    );
    let topic = format!("{}.shop.user_profile", connector["topic.prefix"]);
    let text = std::fs::read_to_string(&config_path).expect("connectors.toml");
    assert!(
        text.contains(&format!("topics = [\"{topic}\"]")),
        "the CDC pipeline reads the connector's topic {topic}"
    );
    assert_eq!(
        lakejoin["depends_on"]["kafka"]["condition"],
        "service_healthy"
    );
    for volume in ["mariadb-data", "connect-data", "debezium-warehouse"] {
        assert!(
            compose["volumes"].get(volume).is_some(),
            "volume {volume} is not declared"
        );
    }
}
