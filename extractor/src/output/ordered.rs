//! Numbered windows formatted by several workers and written out in
//! order, by the workers themselves.
//!
//! A worker takes the next window as soon as it is free, so a slow window
//! holds up no other worker. What it formats goes out in pieces: a piece
//! of the window being written is written at once by the worker that
//! made it, which then writes whatever the next windows have queued; a
//! piece of a later window is queued. No thread is woken to write: on two
//! cores, a writer thread woken for each piece made two workers 1.7
//! times as fast as one, against 1.9 times as fast as one worker handing
//! over to such a thread. A worker ahead of the window being written
//! waits while [`QUEUED_PER_WORKER`] pieces per worker are queued, and
//! one whose window is being written by another while two of its pieces
//! are queued, so memory is bounded however big a window turns out.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Pieces of later windows queued, per worker, before a worker ahead of
/// the window being written waits: with the piece each is formatting and
/// the one being written, about three per worker are held.
const QUEUED_PER_WORKER: usize = 2;

/// Pieces of the window being written queued while another worker writes.
const QUEUED_BEING_WRITTEN: usize = 2;

/// What a worker hands a piece of its window's text over with; it leaves
/// the text empty.
pub(super) type HandOver<'h> = dyn FnMut(&mut Vec<u8>) -> io::Result<()> + 'h;

/// Runs `format(w, state, text, hand_over)` for the windows `0..count` on
/// `workers` threads, each with a `state` of its own, and writes their
/// text to `out` in window order: the same bytes whatever the number of
/// workers. `format` formats window `w` into `text`, handing it over
/// whenever it holds enough; what is left in `text` is the window's last
/// piece.
pub(super) fn write_in_order<S: Default>(
    out: &mut (impl Write + Send),
    count: usize,
    workers: usize,
    format: &(impl Fn(usize, &mut S, &mut Vec<u8>, &mut HandOver) -> io::Result<()> + Sync),
) -> io::Result<()> {
    let turns = workers.max(1);
    let shared = Shared {
        state: Mutex::new(State {
            sleepers: vec![0; turns],
            ..State::default()
        }),
        turns: (0..turns).map(|_| Condvar::new()).collect(),
        next: AtomicUsize::new(0),
        limit: QUEUED_PER_WORKER * workers,
        out: Mutex::new(out),
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let shared = &shared;
            scope.spawn(move || {
                // A worker that panics stops the others, which could be
                // waiting for its window to be written.
                let stop = StopIfPanicking(shared);
                let mut state = S::default();
                loop {
                    let w = shared.next.fetch_add(1, Ordering::Relaxed);
                    if w >= count {
                        break;
                    }
                    let mut text = shared.lock().spare.pop().unwrap_or_default();
                    let mut hand_over = |text: &mut Vec<u8>| {
                        let full = std::mem::take(text);
                        *text = shared.hand_over(w, full, false)?;
                        Ok(())
                    };
                    let formatted = format(w, &mut state, &mut text, &mut hand_over);
                    if formatted
                        .and_then(|_| shared.hand_over(w, text, true))
                        .is_err()
                    {
                        shared.stop();
                        break;
                    }
                }
                drop(stop);
            });
        }
    });
    let st = shared
        .state
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    match st.failed {
        Some(e) => Err(e),
        None if st.writing == count => Ok(()),
        None => Err(stopped()),
    }
}

/// What the workers share.
struct Shared<'o, W> {
    state: Mutex<State>,
    /// Where a worker with a piece of window `w` waits, for room in the
    /// queue or its turn: `turns[w % turns.len()]`. Woken are those whose
    /// window is now being written, or, once the queue has room, those
    /// waiting: with one condition variable for all, 64 workers on two
    /// cores were all woken for every piece written, and wrote text half
    /// as fast as 16.
    turns: Vec<Condvar>,
    /// The next window no worker has taken.
    next: AtomicUsize,
    /// Pieces of later windows queued before a worker ahead waits.
    limit: usize,
    /// Locked only by the worker that is writing: never contended.
    out: Mutex<&'o mut W>,
}

#[derive(Default)]
struct State {
    /// The window being written: every one before it is written.
    writing: usize,
    /// Whether a worker is writing: it writes every piece queued for
    /// [`Self::writing`] before it stops.
    writer_busy: bool,
    /// The pieces queued, by window.
    windows: BTreeMap<usize, Queued>,
    /// Pieces in `windows`, all windows together.
    queued: usize,
    /// Written buffers, emptied, for the workers to fill again.
    spare: Vec<Vec<u8>>,
    /// Set when writing failed or a worker stopped.
    stopped: bool,
    /// Why writing failed.
    failed: Option<io::Error>,
    /// Workers waiting on each of [`Shared::turns`]: nobody is woken for
    /// nothing.
    sleepers: Vec<usize>,
}

/// A window's pieces waiting to be written.
#[derive(Default)]
struct Queued {
    pieces: VecDeque<Vec<u8>>,
    /// Whether its last piece is among them.
    ended: bool,
}

fn stopped() -> io::Error {
    io::Error::other("a formatting thread stopped")
}

impl State {
    /// Pieces queued of the window being written.
    fn of_writing(&self) -> usize {
        self.windows
            .get(&self.writing)
            .map_or(0, |q| q.pieces.len())
    }

    /// Whether a piece of window `w` must wait before it is queued.
    fn must_wait(&self, w: usize, limit: usize) -> bool {
        if w == self.writing {
            self.writer_busy && self.of_writing() >= QUEUED_BEING_WRITTEN
        } else {
            self.queued - self.of_writing() >= limit
        }
    }

    /// The next piece of the window being written; the next window is
    /// the one being written once its last piece is taken.
    fn pop_ready(&mut self) -> Option<Vec<u8>> {
        let q = self.windows.get_mut(&self.writing)?;
        let piece = q.pieces.pop_front()?;
        let last = q.ended && q.pieces.is_empty();
        self.queued -= 1;
        if last {
            self.windows.remove(&self.writing);
            self.writing += 1;
        }
        Some(piece)
    }
}

impl<W: Write> Shared<'_, W> {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands over `piece` of window `w` (its last when `last`): queued,
    /// then, when `w` is being written and no other worker writes,
    /// written with every piece queued after it that is ready. Returns an
    /// empty buffer to go on with.
    fn hand_over(&self, w: usize, piece: Vec<u8>, last: bool) -> io::Result<Vec<u8>> {
        let mut st = self.lock();
        let turn = w % self.turns.len();
        while !st.stopped && st.must_wait(w, self.limit) {
            st.sleepers[turn] += 1;
            st = self.turns[turn]
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            st.sleepers[turn] -= 1;
        }
        if st.stopped {
            return Err(stopped());
        }
        let q = st.windows.entry(w).or_default();
        q.pieces.push_back(piece);
        q.ended |= last;
        st.queued += 1;
        if w == st.writing && !st.writer_busy {
            st.writer_busy = true;
            st = self.write_ready(st)?;
            st.writer_busy = false;
            self.wake(&st);
        }
        Ok(if last {
            Vec::new()
        } else {
            st.spare.pop().unwrap_or_default()
        })
    }

    /// Writes every piece ready, in order, the state unlocked while it
    /// writes.
    fn write_ready<'s>(
        &'s self,
        mut st: MutexGuard<'s, State>,
    ) -> io::Result<MutexGuard<'s, State>> {
        while let Some(mut piece) = st.pop_ready() {
            self.wake(&st);
            drop(st);
            let written = self
                .out
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write_all(&piece);
            piece.clear();
            st = self.lock();
            st.spare.push(piece);
            if let Err(e) = written {
                st.failed = Some(e);
                drop(st);
                self.stop();
                return Err(stopped());
            }
        }
        Ok(st)
    }

    /// Wakes whoever may go on now: the worker of the window being
    /// written (a new one, or one whose pieces were taken or whose writer
    /// stopped), and, once later windows' pieces fill at most half the
    /// queue, every waiting worker (not at every piece: each woken worker
    /// costs a context switch).
    fn wake(&self, st: &State) {
        let room = st.queued - st.of_writing() <= self.limit / 2;
        let writing = st.writing % self.turns.len();
        for (turn, &n) in st.sleepers.iter().enumerate() {
            if n > 0 && (turn == writing || room) {
                self.turns[turn].notify_all();
            }
        }
    }

    /// Stops every worker: those waiting return, the others at their
    /// next hand-over.
    fn stop(&self) {
        self.lock().stopped = true;
        for turn in &self.turns {
            turn.notify_all();
        }
    }
}

/// Stops every worker when dropped while its thread panics.
struct StopIfPanicking<'s, 'o, W: Write>(&'s Shared<'o, W>);

impl<W: Write> Drop for StopIfPanicking<'_, '_, W> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Window `w`'s text: `w % 5` pieces handed over, then its last,
    /// each of a length that varies from window to window (none for
    /// some), so windows finish out of order.
    fn window_text(w: usize, piece: usize) -> Vec<u8> {
        let len = (w * 7919 + piece * 104_729) % 3000;
        (0..len).map(|i| (w + i) as u8).collect()
    }

    fn format_window(
        w: usize,
        _: &mut (),
        text: &mut Vec<u8>,
        hand_over: &mut HandOver,
    ) -> io::Result<()> {
        for piece in 0..w % 5 {
            text.extend(window_text(w, piece));
            hand_over(text)?;
            assert!(text.is_empty(), "a piece handed over leaves the text empty");
        }
        text.extend(window_text(w, w % 5));
        Ok(())
    }

    /// [`write_in_order`] of `count` windows of [`format_window`] into
    /// `out`, failing rather than hanging if it does not return.
    fn written<W: Write + Send + 'static>(
        mut out: W,
        count: usize,
        workers: usize,
    ) -> (io::Result<()>, W) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let result = write_in_order(&mut out, count, workers, &format_window);
            let _ = tx.send((result, out));
        });
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{workers} workers: no end within a minute"))
    }

    #[test]
    fn windows_are_written_in_order_whatever_the_workers() {
        const COUNT: usize = 500;
        let want: Vec<u8> = (0..COUNT)
            .flat_map(|w| (0..=w % 5).flat_map(move |p| window_text(w, p)))
            .collect();
        for workers in [1, 2, 3, 8, 16] {
            let (result, out) = written(Vec::new(), COUNT, workers);
            result.unwrap();
            assert!(out == want, "{workers} workers");
        }
    }

    /// A sink that fails once it has taken `room` bytes.
    struct Full {
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "full"));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_is_the_error_and_stops_every_worker() {
        for workers in [2, 3, 8] {
            let (result, _) = written(Full { room: 100_000 }, 10_000, workers);
            let err = result.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{workers} workers");
        }
    }

    /// The panic reaches the caller (as the scope's own), and the other
    /// workers, some waiting for the window that never comes, return.
    #[test]
    #[should_panic(expected = "a scoped thread panicked")]
    fn a_worker_that_panics_stops_the_others() {
        let format = |w: usize, _: &mut (), text: &mut Vec<u8>, hand_over: &mut HandOver| {
            assert!(w != 300, "window 300");
            text.extend([1; 100]);
            hand_over(text)
        };
        let _ = write_in_order(&mut Vec::new(), 1000, 4, &format);
    }
}
