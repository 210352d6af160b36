//! What the benches that run `warren worker`s share: a `redis-server` of their own
//! and worker processes, each killed when dropped, and what a process has used.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` without persistence on a free port; killed when dropped.
pub(crate) struct Redis {
    pub(crate) url: String,
    server: Child,
}

impl Redis {
    pub(crate) fn start() -> anyhow::Result<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let server = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!("cannot start redis-server ({e}): install it with `apt-get install redis-server`")
            })?;
        let redis = Redis {
            url: format!("redis://127.0.0.1:{port}"),
            server,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(redis)
    }
}

impl Redis {
    /// A connection to it.
    pub(crate) fn connect(&self) -> anyhow::Result<redis::Connection> {
        Ok(redis::Client::open(self.url.as_str())?.get_connection()?)
    }

    /// Bytes Redis holds (`INFO memory`'s `used_memory`).
    pub(crate) fn used_memory(&self) -> anyhow::Result<u64> {
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query(&mut self.connect()?)?;
        info.lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no used_memory in INFO: {info}"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A `warren worker` process; killed when dropped.
pub(crate) struct Worker(pub(crate) Child);

impl Worker {
    pub(crate) fn start(
        dir: &Path,
        redis: &Redis,
        name: &str,
        concurrency: usize,
    ) -> anyhow::Result<Worker> {
        let log = dir.join(format!("{name}.log"));
        let worker = Worker(
            Command::new(env!("CARGO_BIN_EXE_warren"))
                .args(["worker", "--redis", &redis.url, "--name", name])
                .args(["--concurrency", &concurrency.to_string()])
                .current_dir(dir)
                .env_remove("WARREN_CONFIG")
                .env("RUST_LOG", "warn,warren=info")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log)?)
                .spawn()?,
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&log)?.contains("taking jobs") {
            anyhow::ensure!(
                Instant::now() < deadline,
                "worker {name} did not start: {}",
                std::fs::read_to_string(&log)?
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(worker)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a process has used: CPU (user and system) and its peak resident memory.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Used {
    pub(crate) cpu: Duration,
    pub(crate) peak_rss_kib: u64,
}

impl Used {
    /// What the live process `pid` has used so far (from `/proc`).
    pub(crate) fn of(pid: u32) -> anyhow::Result<Used> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The fields after the command (which may hold spaces) in parentheses.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
        // SAFETY: sysconf has no preconditions.
        #[allow(unsafe_code)]
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let peak_rss_kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        Ok(Used {
            cpu: Duration::from_secs_f64(ticks as f64 / per_second as f64),
            peak_rss_kib,
        })
    }

    /// Waits for `child` to exit: its exit status and what it used, whole.
    pub(crate) fn wait(child: &mut Child) -> anyhow::Result<(std::process::ExitStatus, Used)> {
        let mut status = 0;
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `child` is our child; wait4 reaps it and fills `usage`.
        #[allow(unsafe_code)]
        let (pid, usage) = unsafe {
            let pid = libc::wait4(child.id() as i32, &mut status, 0, usage.as_mut_ptr());
            (pid, usage.assume_init())
        };
        anyhow::ensure!(pid > 0, "wait4 failed: {}", std::io::Error::last_os_error());
        let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        let used = Used {
            cpu: time(usage.ru_utime) + time(usage.ru_stime),
            peak_rss_kib: usage.ru_maxrss as u64,
        };
        Ok((
            std::os::unix::process::ExitStatusExt::from_raw(status),
            used,
        ))
    }
}
