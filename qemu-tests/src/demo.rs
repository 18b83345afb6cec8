//! The user-space demo: a four-CPU workload recorded into a region file,
//! a crash in the middle of it, and recovery with the real `crashring`
//! binary, as a field engineer would run it on a pmem backing file.

use anyhow::{Context, Result};
use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use xshell::{cmd, Shell};

const CPUS: u16 = 4;

/// A deterministic pseudo-random sequence, so every demo run is the same.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Records the workload and returns the image.
fn record() -> Result<Vec<u8>> {
    let specs: Vec<StreamSpec> = (0..CPUS).map(StreamSpec::cpu).collect();
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        created_ns: 5_000_000_000,
        wall_offset_ns: 1_795_000_000_000_000_000,
        kernel_release: "6.12.0-demo",
        hostname: "signage-07",
        boot_id: *b"demo-boot-id-001",
        ..Default::default()
    };
    let mut image = vec![0u8; 1 << 20];
    let printk = schema::builtin(schema::EVENT_PRINTK).context("printk schema")?;
    let marker = schema::builtin(schema::EVENT_MARKER).context("marker schema")?;
    let switch = schema::builtin(schema::EVENT_SCHED_SWITCH).context("sched_switch schema")?;
    let crash = schema::builtin(schema::EVENT_CRASH).context("crash schema")?;
    let mut formatted = write::format(&mut image, &cfg)?;
    let mut cpus: Vec<_> = formatted.streams.by_ref().collect();
    let mut rng = Lcg(7);
    let mut now = cfg.created_ns;
    for n in 0..60_000u64 {
        now += rng.next() % 20_000;
        let cpu = (rng.next() % u64::from(CPUS)) as usize;
        let w = &mut cpus[cpu];
        let _ = match rng.next() % 8 {
            0 | 1 => {
                let text = format!("drm: [CRTC:{}] vblank {} flip done", cpu, n);
                let v = [
                    Value::Unsigned(7),
                    Value::Unsigned(0),
                    Value::Unsigned(100 + cpu as u64),
                    Value::Unsigned(n),
                    Value::Str(text.as_bytes()),
                ];
                w.write_event(now, printk, &v)
            }
            2 => {
                let text = format!("compositor frame {n} presented");
                w.write_event(
                    now,
                    marker,
                    &[
                        Value::Unsigned(812),
                        Value::Chars(b"weston"),
                        Value::Str(text.as_bytes()),
                    ],
                )
            }
            _ => {
                let (prev, next) = (1000 + rng.next() % 50, 1000 + rng.next() % 50);
                let v = [
                    Value::Signed(prev as i64),
                    Value::Signed(120),
                    Value::Unsigned(1),
                    Value::Signed(next as i64),
                    Value::Signed(120),
                    Value::Chars(b"worker"),
                    Value::Chars(b"player"),
                ];
                w.write_event(now, switch, &v)
            }
        };
    }
    let msg = "Kernel panic - not syncing: sysrq triggered crash";
    now += 1_000;
    let _ = cpus[2].write_event(
        now,
        crash,
        &[
            Value::Unsigned(REASON_PANIC.into()),
            Value::Unsigned(2),
            Value::Str(msg.as_bytes()),
        ],
    );
    formatted
        .control
        .set_state(STATE_CRASHED, REASON_PANIC, now, 2, msg);
    cpus.iter_mut().for_each(|w| w.close());
    Ok(image)
}

pub fn run(sh: &Shell) -> Result<()> {
    let dir = sh.current_dir().join("target/crashring-demo");
    sh.create_dir(&dir)?;
    let path = dir.join("region.bin");
    eprintln!(
        "== demo: recording 60000 events on {CPUS} CPUs into a 1 MiB region, then a panic on CPU 2"
    );
    sh.write_file(&path, record()?)?;
    cmd!(sh, "cargo build --quiet -p extractor").run()?;
    let crashring = sh.current_dir().join("target/debug/crashring");
    eprintln!("== demo: crashring info {}", path.display());
    // Exit status 1 means "recovered with losses": expected, the ring wrapped.
    let info = cmd!(sh, "{crashring} info {path}").ignore_status().read()?;
    println!("{info}");
    let text = cmd!(sh, "{crashring} extract {path}")
        .ignore_status()
        .read()?;
    let lines: Vec<&str> = text.lines().collect();
    println!("last 20 events before the panic:");
    for l in &lines[lines.len().saturating_sub(20)..] {
        println!("  {l}");
    }
    let out = dir.join("trace.txt");
    sh.write_file(&out, &text)?;
    println!(
        "\nregion image: {}\nfull trace:   {} ({} lines)",
        path.display(),
        out.display(),
        lines.len()
    );
    Ok(())
}
