//! `crashring follow`: the recorder's events as they are written, read
//! from /dev/crashring-current without consuming anything, and how many
//! each writer wrote past the reader (`extractor::follow`).

use super::snapshot::LIVE;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use extractor::follow::Follower;
use extractor::input::live::LiveCopy;
use extractor::input::source::FileSource;
use extractor::output::select::{parse_time, Selection};
use extractor::output::{Format, Writer};
use pstore_ring::kprintf::Pointers;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, ValueEnum)]
enum FollowFormat {
    Text,
    Jsonl,
}

#[derive(Args)]
pub struct FollowArgs {
    /// How each event is printed.
    #[arg(long, value_enum, default_value = "text")]
    format: FollowFormat,
    /// Only this stream (repeatable), as `extract --stream`.
    #[arg(long = "stream", value_name = "NAME")]
    streams: Vec<String>,
    /// Only events of this type (repeatable), as `extract --type`.
    #[arg(long = "type", value_name = "NAME")]
    types: Vec<String>,
    /// Print what the recorder already holds first, not only what comes.
    #[arg(long)]
    from_start: bool,
    /// How often to look (seconds, or 100ms / 500us; more than 0).
    #[arg(long, value_name = "T", value_parser = parse_interval, default_value = "100ms")]
    every: u64,
    /// Stop after this long, then say what was printed and missed; else
    /// follow until interrupted (SIGINT, SIGTERM), then say it.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    stop_after: Option<u64>,
    /// Follow this live region instead (a crashring-user region file, each
    /// page copied as the module copies its own).
    #[arg(long, value_name = "PATH", default_value = LIVE)]
    from: PathBuf,
}

/// A time between two looks: 0 would read the region without pause.
fn parse_interval(text: &str) -> Result<u64, String> {
    match parse_time(text)? {
        0 => Err("0 would look without pause: give a time of at least 1us".into()),
        ns => Ok(ns),
    }
}

pub fn run(args: FollowArgs) -> Result<u8> {
    let selection = Selection {
        streams: args.streams,
        types: args.types,
        ..Selection::default()
    };
    let format = match args.format {
        FollowFormat::Text => Format::Text,
        FollowFormat::Jsonl => Format::Jsonl,
    };
    // Both are written item by item.
    let Writer::Items(format) = format.writer() else {
        unreachable!("text and jsonl are item formats")
    };
    // One secret key for the whole run: an address keeps its identifier
    // from one poll to the next, and the output alone cannot test guesses.
    let mut key = [0u8; 16];
    rustix::rand::getrandom(&mut key, rustix::rand::GetRandomFlags::empty())
        .context("drawing the key that hashes kernel addresses")?;
    let mut follower =
        Follower::new(args.from_start, Pointers::Hashed(key)).selecting(selection.clone());
    // Interrupted (Ctrl-C, kill), it reads once more and says what it
    // printed and missed, as at --stop-after.
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("setting up the summary at an interrupt")?;
    }
    let start = Instant::now();
    let stop = args.stop_after.map(Duration::from_nanos);
    let mut stdout = std::io::stdout().lock();
    let mut text = Vec::new();
    // A poll that fails (the device gone at an rmmod, nothing being
    // recorded) ends the run, after the summary of what came until then.
    let mut follow = || -> Result<()> {
        loop {
            let done =
                interrupted.load(Ordering::Relaxed) || stop.is_some_and(|s| start.elapsed() >= s);
            let file = FileSource::open(&args.from)
                .with_context(|| format!("opening {}", args.from.display()))?;
            // An ordinary file (a crashring-user region) is copied page by
            // page as the module copies its own for the device.
            let live =
                LiveCopy::new(file).with_context(|| format!("reading {}", args.from.display()))?;
            let mut written = Ok(());
            follower.poll(&live, |view, items| {
                let kept: Vec<_> = items
                    .iter()
                    .copied()
                    .filter(|p| selection.admits(&p.as_item(), view.region))
                    .collect();
                text.clear();
                format.items(&mut text, &kept, view);
                // A poll hands over several chunks: the first failure stands.
                if written.is_ok() {
                    written = stdout.write_all(&text).and_then(|()| stdout.flush());
                }
            })?;
            written.context("writing to standard output")?;
            if done {
                break;
            }
            std::thread::sleep(Duration::from_nanos(args.every));
        }
        Ok(())
    };
    let followed = follow();
    let mut missed_any = false;
    // Streams nothing was written to (nesting lanes, mostly) say nothing,
    // unless their end was replaced unread: then nothing says none was lost.
    // Of the streams asked for: another's misses are not this run's.
    let counts = follower.counts(&selection);
    let active = counts
        .iter()
        .filter(|c| c.handed > 0 || c.missed > 0 || c.dropped > 0 || !c.missed_exact);
    let at_least = |exact: bool| if exact { "" } else { "at least " };
    for c in active {
        eprintln!(
            "crashring: followed {}: {} events printed or filtered, {}{} missed (written over before they were read), {}{} dropped by its writer",
            c.label,
            c.handed,
            at_least(c.missed_exact),
            c.missed,
            at_least(c.dropped_exact),
            c.dropped
        );
        missed_any |= c.missed > 0 || !c.missed_exact;
    }
    match followed {
        // The reader of the output went (`follow | head`): what was
        // missed still sets the exit status.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(u8::from(missed_any))
        }
        followed => followed.map(|()| u8::from(missed_any)),
    }
}
