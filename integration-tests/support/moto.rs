//! A moto S3 server (from the test venv) on a free loopback port, stopped on drop.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program installed in the test venv next to its Python.
pub fn venv_bin(name: &str) -> PathBuf {
    let bin = super::python()
        .parent()
        .map(|p| p.join(name))
        .unwrap_or_default();
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test.sh (it creates the venv with moto)",
        bin.display()
    );
    bin
}

pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Moto {
    pub fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(venv_bin("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not start within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn create_bucket(&self, bucket: &str) {
        let script = "import sys, boto3\n\
            s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
            aws_secret_access_key='test', region_name='us-east-1')\n\
            s3.create_bucket(Bucket=sys.argv[2])\n";
        let out = Command::new(venv_bin("python"))
            .args(["-c", script, &self.endpoint, bucket])
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "create bucket: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
