//! Writing a region's merged items in a format written item by item: the
//! timeline cut into windows of time ([`Windows`]), each merged and
//! formatted on its own core, written in time order.

use super::ordered::{self, HandOver};
use super::select::Selection;
use super::window::Windows;
use super::{ItemFormat, LogLine, RegionView};
use pstore_ring::merge::Pulled;
use pstore_ring::read::StreamInfo;
use std::io::{self, Write};
use std::ops::Range;

/// Items formatted at once: big enough that a call costs nothing next to
/// formatting them (1024 and 4096 run at one speed), small enough that a
/// worker's text, handed over once it holds a [`PIECE`], stays small:
/// with 4096, 16 workers held 30 MiB more. Perfetto bundles each CPU's
/// events chunk by chunk, so its bytes follow this (`tests/same_outputs.rs`
/// records them: 512 changes them).
const CHUNK: usize = 1024;

/// Events a window holds per stream merged, at least [`CHUNK`]: where a
/// window starts, each stream's walk begins inside a page, which costs
/// about half a page of events per stream.
const WINDOW_PER_STREAM: usize = 256;

/// Text a worker hands over at once: a window bigger than planned
/// (events crowded at one time) goes in pieces, so memory stays bounded.
/// A worker holds about three ([`ordered`]) and a chunk's text past
/// each: text of a dense 4 GiB region by 64 workers peaked at 247 MiB,
/// against 273 with 256 KiB pieces (with the page index of then). With a
/// writer thread woken for each piece, pieces of 64 KiB made two workers
/// on two cores a third slower.
const PIECE: usize = 128 << 10;

/// Writes the items of `view` that `selection` admits.
pub fn write_items(
    out: &mut (impl Write + Send),
    view: &RegionView,
    selection: &Selection,
    format: &dyn ItemFormat,
) -> io::Result<()> {
    write_items_and_logs(out, view, selection, format, &[])
}

/// Writes the items of `view` that `selection` admits, with the `lines`
/// of the kernel's own logs it admits among them, each before the first
/// item of the timeline later than it (`lines` in time order); a line's
/// place does not depend on which items the selection leaves out.
///
/// The timeline, of the streams the selection keeps from the time it
/// starts at, is cut into windows of time ([`Windows`]); one thread per
/// worker ([`rayon::current_num_threads`], `RAYON_NUM_THREADS` when set)
/// merges and formats the next window no worker has taken, and the
/// windows' texts are written in order ([`ordered`]), so the output is
/// the same bytes whatever the number of workers. Each worker holds its
/// page walks and a piece of text or two ahead, whatever the region's
/// size; text buffers go round rather than being allocated per window.
pub fn write_items_and_logs(
    out: &mut (impl Write + Send),
    view: &RegionView,
    selection: &Selection,
    format: &dyn ItemFormat,
    lines: &[LogLine],
) -> io::Result<()> {
    let lines: Vec<LogLine> = lines
        .iter()
        .filter(|l| selection.admits_log_line(l.ts))
        .copied()
        .collect();
    let windows = windows(view, selection);
    write_in_windows(out, view, &windows, selection, format, &lines)
}

/// The windows [`write_items`] cuts the timeline of `view` into for
/// `selection`.
pub fn windows<'v, 'r, 'a>(
    view: &'v RegionView<'r, 'a>,
    selection: &Selection,
) -> Windows<'v, 'r, 'a> {
    let merged = view.streams().filter(|s| selection.keeps(s.info())).count();
    plan(
        view,
        selection,
        CHUNK.max(WINDOW_PER_STREAM.saturating_mul(merged)),
    )
}

/// The timeline of the streams `selection` keeps, from the time it starts
/// at, in windows of about `per_window` events.
fn plan<'v, 'r, 'a>(
    view: &'v RegionView<'r, 'a>,
    selection: &Selection,
    per_window: usize,
) -> Windows<'v, 'r, 'a> {
    let kept = |s: &StreamInfo| selection.keeps(s);
    Windows::plan(view, &kept, selection.since_ns.unwrap_or(0), per_window)
}

/// [`write_items_and_logs`] through `windows`, `lines` already selected.
fn write_in_windows<'r>(
    out: &mut (impl Write + Send),
    view: &RegionView<'r, '_>,
    windows: &Windows<'_, 'r, '_>,
    selection: &Selection,
    format: &dyn ItemFormat,
    lines: &[LogLine],
) -> io::Result<()> {
    let writer = Windowed {
        view,
        windows,
        selection,
        all: selection.admits_all(),
        format,
        lines,
    };
    let count = windows.count();
    let workers = rayon::current_num_threads().min(count);
    if workers <= 1 {
        let mut batch = Batch::default();
        let mut text = Vec::new();
        let mut write = |text: &mut Vec<u8>| {
            out.write_all(text)?;
            text.clear();
            Ok(())
        };
        for w in 0..count {
            writer.window(w, &mut batch, &mut text, &mut write)?;
            write(&mut text)?;
        }
        return Ok(());
    }
    let format = |w: usize, batch: &mut Batch<'r>, text: &mut Vec<u8>, hand_over: &mut HandOver| {
        writer.window(w, batch, text, hand_over)
    };
    ordered::write_in_order(out, count, workers, &format)
}

/// What every worker formats windows with.
struct Windowed<'w, 'v, 'r, 'a> {
    view: &'w RegionView<'r, 'a>,
    windows: &'w Windows<'v, 'r, 'a>,
    selection: &'w Selection,
    /// Whether the selection admits every item, so none needs asking.
    all: bool,
    format: &'w dyn ItemFormat,
    /// The lines the selection admits, in time order.
    lines: &'w [LogLine<'w>],
}

impl<'r> Windowed<'_, '_, 'r, '_> {
    /// Formats window `w` into `text`, handing it to `hand_over` (which
    /// leaves it empty) whenever it holds a [`PIECE`]; the rest is left
    /// in `text`. The lines of the window's time go before the first item
    /// later than each, those later than all of them at its end: the
    /// windows' edges are times, so every line falls in the window a
    /// single merge would have placed it in.
    fn window(
        &self,
        w: usize,
        batch: &mut Batch<'r>,
        text: &mut Vec<u8>,
        hand_over: &mut dyn FnMut(&mut Vec<u8>) -> io::Result<()>,
    ) -> io::Result<()> {
        let (start, end) = self.windows.span(w);
        let lines = self.lines;
        let mut next = lines.partition_point(|l| l.ts < start);
        let stop = end.map_or(lines.len(), |e| lines.partition_point(|l| l.ts < e));
        batch.clear();
        for p in self.windows.items(w) {
            let item = p.as_item();
            let from = next;
            while next < stop && lines[next].ts < item.time() {
                next += 1;
            }
            if from < next {
                batch.marks.push((batch.items.len(), from..next));
            }
            if self.all || self.selection.admits(&item, self.view.region) {
                batch.items.push(p);
            }
            if batch.items.len() >= CHUNK {
                self.format(batch, text);
                if text.len() >= PIECE {
                    hand_over(text)?;
                }
            }
        }
        if next < stop {
            batch.marks.push((batch.items.len(), next..stop));
        }
        self.format(batch, text);
        Ok(())
    }

    /// Appends the batch's items and lines to `text`, and empties it.
    fn format(&self, batch: &mut Batch<'r>, text: &mut Vec<u8>) {
        let mut from = 0;
        for (at, range) in &batch.marks {
            self.format.items(text, &batch.items[from..*at], self.view);
            self.format
                .log_lines(text, &self.lines[range.clone()], self.view);
            from = *at;
        }
        self.format.items(text, &batch.items[from..], self.view);
        batch.clear();
    }
}

/// Merged items to format, and the log lines among them.
#[derive(Default)]
struct Batch<'r> {
    items: Vec<Pulled<'r, 'r>>,
    /// (item position, lines of the log that go before it).
    marks: Vec<(usize, Range<usize>)>,
}

impl Batch<'_> {
    fn clear(&mut self) {
        self.items.clear();
        self.marks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Overlay;
    use crate::output::{Format, Writer};
    use pstore_ring::layout::PAGE_HEADER_SIZE;
    use pstore_ring::merge::merge;
    use pstore_ring::read::{HeaderTrust, LossKind, Region};
    use pstore_ring::schema::{self, Value};
    use pstore_ring::text::Line;
    use pstore_ring::write::{self, RegionConfig, StreamSpec};

    #[test]
    fn many_chunks_come_out_in_merge_order() {
        let specs: Vec<StreamSpec> = (0..3).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 8 << 20];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        {
            let mut f = write::format(&mut buf, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            // Uneven streams and times, so the merge interleaves them.
            for i in 0..200_000u64 {
                let s = (i * 7 % 11 % 3) as usize;
                let _ = ws[s].write_event(i * 13 + s as u64, lost, &[Value::Unsigned(i)]);
            }
            ws.iter_mut().for_each(|w| w.close());
        }
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let paged = region.decode_paged();
        let view = RegionView::alone(&region, &paged, pstore_ring::kprintf::Pointers::Hidden);
        let mut want = Vec::new();
        for item in merge(&trace.streams) {
            Line::of(&item, &region).write_to(&mut want);
            want.push(b'\n');
        }
        assert!(want.iter().filter(|&&b| b == b'\n').count() > 10 * CHUNK);
        let mut got = Vec::new();
        write_items(
            &mut got,
            &view,
            &Selection::default(),
            &super::super::text::Text,
        )
        .unwrap();
        assert!(got == want);
    }

    /// A region of three CPUs whose times interleave, with losses of every
    /// kind a reader makes (overwritten, an unreadable page) and a stream
    /// whose time goes back twice between its pages: what the windows must
    /// merge exactly as one merge does.
    fn tangled_region() -> Vec<u8> {
        let specs: Vec<StreamSpec> = (0..3).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 1024,
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 512 << 10];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        let exit = schema::builtin(schema::EVENT_IRQ_EXIT).unwrap();
        {
            let mut f = write::format(&mut buf, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            for i in 0..75_000u64 {
                let s = (i * 7 % 11 % 3) as usize;
                // Equal times across streams, so ties are broken by stream.
                let ts = i / 3 * 40;
                let _ = if i % 5 == 0 {
                    ws[s].write_event(ts, exit, &[Value::Unsigned(i % 16), Value::Unsigned(1)])
                } else {
                    ws[s].write_event(ts, lost, &[Value::Unsigned(i)])
                };
            }
            ws.iter_mut().for_each(|w| w.close());
        }
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let (e, checksum) = (region.header.endian, region.header.checksum);
        let size = region.header.page_size as usize;
        let trace = region.decode_paged();
        let at = |s: usize, k: usize| {
            let info = &region.streams[s];
            let slot = trace.streams[s].decoded[k].slot as usize;
            info.pages_offset as usize + slot * size
        };
        let pages = trace.streams[1].decoded.len();
        let back = [(at(1, pages / 3), 3u64), (at(1, pages * 2 / 3), 5)];
        let broken = at(2, trace.streams[2].decoded.len() / 2);
        drop(trace);
        // Each page's time goes back by a third, then a fifth, of itself.
        for (page, part) in back {
            let first_ts = u64::from_le_bytes(buf[page + 16..page + 24].try_into().unwrap());
            buf[page + 16..page + 24].copy_from_slice(&(first_ts - first_ts / part).to_le_bytes());
            let commit = u32::from_le_bytes(buf[page + 32..page + 36].try_into().unwrap());
            let data = &buf[page + PAGE_HEADER_SIZE..][..commit as usize];
            let crc = checksum.crc(&[&buf[page..page + 44], data]);
            buf[page + 44..page + 48].copy_from_slice(&crc.to_le_bytes());
        }
        assert_eq!(e, pstore_ring::endian::Endian::Little);
        buf[broken + PAGE_HEADER_SIZE + 3] ^= 0x55;
        buf
    }

    /// What one merge of the whole gives: every line before the first item
    /// later than it, then the items the selection admits, one by one.
    fn one_merge(
        view: &RegionView,
        selection: &Selection,
        format: &dyn ItemFormat,
        lines: &[LogLine],
    ) -> Vec<u8> {
        let lines: Vec<LogLine> = lines
            .iter()
            .filter(|l| selection.admits_log_line(l.ts))
            .copied()
            .collect();
        let mut out = Vec::new();
        let mut next = 0;
        for pulled in view.merged() {
            let item = pulled.as_item();
            while lines.get(next).is_some_and(|l| l.ts < item.time()) {
                format.log_lines(&mut out, &lines[next..=next], view);
                next += 1;
            }
            if selection.admits(&item, view.region) {
                format.items(&mut out, &[pulled], view);
            }
        }
        format.log_lines(&mut out, &lines[next..], view);
        out
    }

    #[test]
    fn windows_write_the_bytes_of_one_merge_whatever_the_workers() {
        let buf = tangled_region();
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let paged = region.decode_paged();
        let trace = region.decode();
        // The region is what it is meant to be: a stream going back in
        // time, and losses of both kinds.
        let ts: Vec<u64> = trace.streams[1].events.iter().map(|e| e.ts).collect();
        assert_eq!(ts.windows(2).filter(|w| w[1] < w[0]).count(), 2);
        let kinds: Vec<LossKind> = trace
            .streams
            .iter()
            .flat_map(|s| &s.losses)
            .map(|l| l.kind)
            .collect();
        assert!(
            kinds.contains(&LossKind::Overwritten) && kinds.contains(&LossKind::Unreadable),
            "{kinds:?}"
        );
        let (first, last) = (ts[0], *ts.iter().max().unwrap());
        // A bundle's redaction: every event of a stream left out, every
        // third of another, and some given new payloads.
        let mut overlay = Overlay::default();
        for (at, e) in paged.streams[0].events().enumerate() {
            match at % 10 {
                0 | 3 | 6 | 9 => overlay.leave_out(0, at),
                1 => overlay.rewrite(0, at, &e.payload.iter().rev().copied().collect::<Vec<u8>>()),
                _ => {}
            }
        }
        for at in 0..paged.streams[2].event_count() {
            overlay.leave_out(2, at);
        }
        for overlay in [None, Some(&overlay)] {
            let view = RegionView {
                index: 0,
                addr: 0,
                region: &region,
                trace: &paged,
                overlay,
                pointers: pstore_ring::kprintf::Pointers::Hidden,
            };
            same_bytes_whatever_the_workers(&view, first, last);
        }
    }

    /// Every item format, with log lines and selections, written by 1, 2, 3
    /// and 16 workers in windows of 5 events to many thousands: the bytes
    /// of one merge (or, for Perfetto, of one worker). `first` and `last`:
    /// the times the view's events span.
    fn same_bytes_whatever_the_workers(view: &RegionView, first: u64, last: u64) {
        // Log lines before, among (at the items' own times too) and after.
        let times: Vec<u64> = (0..400u64)
            .map(|i| first.saturating_sub(500) + i * (last - first + 1000) / 400 + i % 3)
            .chain([first, last, last + 1, u64::MAX])
            .collect();
        let mut times = times;
        times.sort_unstable();
        let lines: Vec<LogLine> = times
            .iter()
            .map(|&ts| LogLine {
                ts,
                source: "kernel printk log",
                text: "a line",
            })
            .collect();
        let mid = first + (last - first) / 2;
        let selections = [
            Selection::default(),
            Selection {
                since_ns: Some(mid - 77_777),
                until_ns: Some(mid + 33_333),
                ..Default::default()
            },
            Selection {
                types: vec!["irq_handler_exit".into(), "log".into()],
                since_ns: Some(mid),
                ..Default::default()
            },
            Selection {
                cpu: Some(1),
                ..Default::default()
            },
        ];
        let formats = Format::all().filter_map(|f| match f.writer() {
            Writer::Items(w) => Some((f, w)),
            Writer::Files(_) => None,
        });
        for (name, format) in formats {
            for selection in &selections {
                let admitted: Vec<LogLine> = lines
                    .iter()
                    .filter(|l| selection.admits_log_line(l.ts))
                    .copied()
                    .collect();
                let write = |workers, per_window| {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(workers)
                        .build()
                        .unwrap();
                    let windows = plan(view, selection, per_window);
                    let mut got = Vec::new();
                    pool.install(|| {
                        write_in_windows(&mut got, view, &windows, selection, format, &admitted)
                    })
                    .unwrap();
                    got
                };
                // Perfetto bundles a CPU's events run by run, so its bytes
                // follow the windows, not the workers; every other
                // format's are those of one merge.
                let want =
                    (name != Format::Perfetto).then(|| one_merge(view, selection, format, &lines));
                for per_window in [5, 300, CHUNK] {
                    let one = write(1, per_window);
                    if let Some(want) = &want {
                        assert!(want.len() > 10_000, "{selection:?}");
                        assert!(
                            one == *want,
                            "{name:?}, windows of {per_window}, {selection:?}"
                        );
                    }
                    for workers in [2, 3, 16] {
                        assert!(
                            write(workers, per_window) == one,
                            "{name:?}, {workers} workers, windows of {per_window}, {selection:?}"
                        );
                    }
                }
            }
        }
    }
}
