//! An Apache Kafka broker of a test's own, for the tests that stop and start a broker
//! (the shared one must stay up for every other test).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::tail;

/// An Apache Kafka broker of this test's own (`scripts/kafka/broker.sh`, as
/// `scripts/test.sh` starts the shared one), for the tests that stop and start a broker.
/// Its ports, users and data live in a directory, so a restart keeps them. Stopped when
/// dropped.
pub struct KafkaBroker {
    dir: PathBuf,
    running: bool,
    /// The PLAINTEXT listener's `host:port`.
    pub bootstrap: String,
}

impl KafkaBroker {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka/broker.sh")
    }

    fn run_script(command: &str, dir: &Path) {
        let output = Command::new("bash")
            .arg(Self::script())
            .arg(command)
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running scripts/kafka/broker.sh {command}: {e}"));
        assert!(
            output.status.success(),
            "scripts/kafka/broker.sh {command} {} failed: {}\n{}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(dir.join("logs/broker.log"))
                .map(|log| tail(&log, 40))
                .unwrap_or_default()
        );
    }

    /// Sets a broker up in `dir` (ports, users, storage) without starting it, so a test
    /// can point lakejoin at an address where nothing listens yet.
    pub fn set_up(dir: &Path) -> Self {
        Self::run_script("setup", dir);
        let env = std::fs::read_to_string(dir.join("broker.env")).expect("broker.env");
        let bootstrap = env
            .lines()
            .find_map(|l| l.strip_prefix("export KAFKA_BOOTSTRAP="))
            .expect("KAFKA_BOOTSTRAP in broker.env")
            .to_owned();
        KafkaBroker {
            dir: dir.to_owned(),
            running: false,
            bootstrap,
        }
    }

    /// Sets up and starts a broker in `dir`.
    pub fn start_in(dir: &Path) -> Self {
        let mut broker = Self::set_up(dir);
        broker.start();
        broker
    }

    /// Starts the broker (again, with its data) and waits until it serves.
    pub fn start(&mut self) {
        Self::run_script("start", &self.dir);
        self.running = true;
    }

    /// Stops the broker (SIGTERM, as an orderly restart does), keeping its data.
    pub fn stop(&mut self) {
        Self::run_script("stop", &self.dir);
        self.running = false;
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        if self.running {
            let _ = Command::new("bash")
                .arg(Self::script())
                .arg("stop")
                .arg(&self.dir)
                .status();
        }
    }
}
