//! The design lakejoin replaces: customers in Redis, one pipelined HGET round trip per
//! poll batch. redis-server (Debian's package; `scripts/bench.sh` installs it) is started
//! here on a free loopback port, with persistence off; the client speaks RESP over a
//! TcpStream (pipelining is writing every command, then reading every reply).

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::util::{free_port, wait_for};

/// A redis-server of the harness's own, killed when dropped.
pub struct RedisServer {
    child: Child,
    pub address: String,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisServer {
    /// redis-server's pid, for its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(log: &Path) -> Result<Self> {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = free_port()?;
        let log_file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| {
                format!(
                    "starting {binary} (install it with `apt-get install redis-server`, as \
                     scripts/bench.sh does, or set REDIS_SERVER)"
                )
            })?;
        let mut server = RedisServer {
            child,
            address: format!("127.0.0.1:{port}"),
        };
        let address = server.address.clone();
        wait_for(
            &format!("redis-server answering PING on {address}"),
            Duration::from_secs(30),
            || {
                if let Some(status) = server.child.try_wait()? {
                    bail!(
                        "redis-server exited at start ({status}); see {}",
                        log.display()
                    );
                }
                Ok(Redis::connect(&address).and_then(|mut r| r.ping()).is_ok())
            },
        )?;
        Ok(server)
    }
}

/// A RESP reply (the kinds HSET, HGET and PING answer with).
#[derive(Debug)]
pub enum Reply {
    Status(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
}

pub struct Redis {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

impl Redis {
    pub fn connect(address: &str) -> Result<Self> {
        let stream = TcpStream::connect(address)
            .with_context(|| format!("connecting to redis {address}"))?;
        stream.set_nodelay(true)?;
        Ok(Redis {
            reader: BufReader::with_capacity(1 << 20, stream.try_clone()?),
            writer: BufWriter::with_capacity(1 << 20, stream),
        })
    }

    /// Queues one command (sent at [`Redis::flush`]).
    pub fn command(&mut self, args: &[&[u8]]) -> Result<()> {
        write!(self.writer, "*{}\r\n", args.len())?;
        for arg in args {
            write!(self.writer, "${}\r\n", arg.len())?;
            self.writer.write_all(arg)?;
            self.writer.write_all(b"\r\n")?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        self.writer.flush().context("writing to redis")
    }

    fn line(&mut self, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        self.reader
            .read_until(b'\n', buf)
            .context("reading from redis")?;
        if !buf.ends_with(b"\r\n") {
            bail!("redis closed the connection mid-reply");
        }
        buf.truncate(buf.len() - 2);
        Ok(())
    }

    /// Reads the next reply.
    pub fn reply(&mut self) -> Result<Reply> {
        let mut line = Vec::with_capacity(64);
        self.line(&mut line)?;
        let (kind, rest) = line.split_first().context("empty redis reply")?;
        let text = std::str::from_utf8(rest).context("redis reply header")?;
        match kind {
            b'+' => Ok(Reply::Status(text.to_owned())),
            b'-' => bail!("redis error: {text}"),
            b':' => Ok(Reply::Integer(text.parse()?)),
            b'$' => {
                let len: i64 = text.parse()?;
                if len < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut data = vec![0; len as usize + 2];
                self.reader
                    .read_exact(&mut data)
                    .context("reading from redis")?;
                data.truncate(len as usize);
                Ok(Reply::Bulk(Some(data)))
            }
            other => bail!("unexpected redis reply type {:?}", *other as char),
        }
    }

    pub fn ping(&mut self) -> Result<()> {
        self.command(&[b"PING"])?;
        self.flush()?;
        match self.reply()? {
            Reply::Status(s) if s == "PONG" => Ok(()),
            other => bail!("PING answered {other:?}"),
        }
    }
}
