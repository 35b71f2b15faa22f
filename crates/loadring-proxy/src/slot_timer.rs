//! The timer of a worker thread's requests: the header read timeout of
//! its client connections (the HTTP/1.1 server, downstream/, arms it for
//! every request, and for each kept-alive connection waiting for its next
//! one) and each request's own
//! timeout. Both are set for every request, so they must cost next to
//! nothing.
//!
//! tokio's timer wheel is exact and general: each sleep takes the driver's
//! lock to be registered and again to be removed, more work than the rest
//! of a header read. Here a sleep is a slot in its worker thread's list (a
//! waker and a deadline); one task per thread wakes the slots whose
//! deadline passed, then sleeps until the earliest left (woken sooner when
//! an earlier one comes). A sleep therefore never ends early, and ends late
//! by at most that task's own timer's lateness.
//!
//! Limits: for current-thread runtimes only (the proxy's workers; see
//! [`SlotTimer::fits_this_runtime`] and [`use_on_this_thread`]): a sleep
//! belongs to the thread it was first polled on, and its sweeper must run
//! there too. A sleep dropped on another thread would leave its slot until
//! its deadline (a generation number keeps it from touching another
//! sleep's). [`timeout`] falls back to tokio's timer on other threads.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;

/// How long the sweeping task sleeps at most between two looks.
const LOOK_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// The timer of this module: sleeps that are slots in their thread's
/// list. The proxy sleeps through [`timeout`]; the tests make sleeps of
/// their own with it as a [`hyper::rt::Timer`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SlotTimer;

impl SlotTimer {
    /// Whether the runtime this is called on keeps each task on one
    /// thread, as this timer needs (a current-thread runtime).
    pub(crate) fn fits_this_runtime() -> bool {
        tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
            runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
        })
    }
}

#[cfg(test)]
impl hyper::rt::Timer for SlotTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(SlotSleep::until(deadline))
    }
}

/// Lets [`timeout`] use this thread's slots: called by a worker whose
/// runtime [fits](SlotTimer::fits_this_runtime).
pub(crate) fn use_on_this_thread() {
    with_slots(|slots| slots.usable = true);
}

/// The timeout [`timeout`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// `fut`, unless `duration` passes first: on this thread's slots where a
/// worker [allowed it](use_on_this_thread), else on tokio's timer.
// Inlined: `fut` (a request's whole attempt) is built in place, not
// copied in and out of a call.
#[inline(always)]
pub(crate) fn timeout<F: Future>(duration: Duration, fut: F) -> Timeout<F> {
    let deadline = if with_slots(|slots| slots.usable) {
        Deadline::Slot(SlotSleep::until(Instant::now() + duration))
    } else {
        Deadline::Tokio(Box::pin(tokio::time::sleep(duration)))
    };
    Timeout { fut, deadline }
}

/// [`timeout`] counted from `start`, a time the caller has just read (one
/// reading of the clock serves both): `fut`, unless `duration` passes
/// after `start` first. On tokio's timer, what is left of `duration` is
/// counted on tokio's clock (which tests pause).
#[inline(always)]
pub(crate) fn timeout_from<F: Future>(start: Instant, duration: Duration, fut: F) -> Timeout<F> {
    let deadline = if with_slots(|slots| slots.usable) {
        Deadline::Slot(SlotSleep::until(start + duration))
    } else {
        let left = duration.saturating_sub(start.elapsed());
        Deadline::Tokio(Box::pin(tokio::time::sleep(left)))
    };
    Timeout { fut, deadline }
}

#[derive(Debug)]
enum Deadline {
    Slot(SlotSleep),
    Tokio(Pin<Box<tokio::time::Sleep>>),
}

pin_project! {
    /// See [`timeout`].
    #[derive(Debug)]
    pub(crate) struct Timeout<F> {
        #[pin]
        fut: F,
        deadline: Deadline,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The future first, as tokio's timeout does: what is ready when
        // the time is up still counts.
        if let Poll::Ready(output) = this.fut.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        let elapsed = match this.deadline {
            Deadline::Slot(sleep) => Pin::new(sleep).poll(cx),
            Deadline::Tokio(sleep) => sleep.as_mut().poll(cx),
        };
        elapsed.map(|()| Err(Elapsed))
    }
}

/// A sleep until `deadline`, its slot taken when first polled.
#[derive(Debug)]
struct SlotSleep {
    deadline: Instant,
    slot: Option<SlotKey>,
}

impl SlotSleep {
    fn until(deadline: Instant) -> Self {
        SlotSleep {
            deadline,
            slot: None,
        }
    }
}

#[cfg(test)]
impl hyper::rt::Sleep for SlotSleep {}

impl Future for SlotSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let key = self.slot;
        let (ready, key) = with_slots(|slots| match key {
            Some(key) => (slots.poll(key, cx.waker()), Some(key)),
            None => (false, Some(slots.insert(deadline, cx.waker().clone()))),
        });
        self.slot = key;
        if ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for SlotSleep {
    fn drop(&mut self) {
        if let Some(key) = self.slot {
            with_slots(|slots| slots.remove(key));
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SlotKey {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
enum State {
    Free,
    Waiting(Waker),
    Fired,
}

#[derive(Debug)]
struct Slot {
    deadline: Instant,
    generation: u32,
    state: State,
}

/// One thread's sleeps.
#[derive(Debug, Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    waiting: usize,
    /// A task sweeps these slots.
    sweeping: bool,
    /// When the sweeping task means to look next, and its waker: a sleep
    /// due sooner wakes it.
    next_look: Option<(Instant, Waker)>,
    /// [`timeout`] may use these slots (a worker's thread).
    usable: bool,
    /// Looks the sweeping task took before its own timer ran out.
    early_looks: u64,
}

impl Slots {
    fn insert(&mut self, deadline: Instant, waker: Waker) -> SlotKey {
        self.waiting += 1;
        if !self.sweeping {
            self.sweeping = start_sweeping();
        } else if let Some((next_look, _)) = &self.next_look {
            if deadline < *next_look {
                if let Some((_, sweeper)) = self.next_look.take() {
                    sweeper.wake();
                }
            }
        }
        match self.free.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.deadline = deadline;
                slot.state = State::Waiting(waker);
                SlotKey {
                    index,
                    generation: slot.generation,
                }
            }
            None => {
                let index = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
                self.slots.push(Slot {
                    deadline,
                    generation: 0,
                    state: State::Waiting(waker),
                });
                SlotKey {
                    index,
                    generation: 0,
                }
            }
        }
    }

    fn get_mut(&mut self, key: SlotKey) -> Option<&mut Slot> {
        self.slots
            .get_mut(key.index as usize)
            .filter(|slot| slot.generation == key.generation && !matches!(slot.state, State::Free))
    }

    /// Whether the slot fired; else its waker is the latest.
    fn poll(&mut self, key: SlotKey, waker: &Waker) -> bool {
        match self.get_mut(key) {
            // Gone: dropped on this thread under another key, or polled on
            // another thread than its own; firing is the safe answer.
            Some(Slot {
                state: State::Waiting(current),
                ..
            }) => {
                if !current.will_wake(waker) {
                    current.clone_from(waker);
                }
                false
            }
            _ => true,
        }
    }

    fn remove(&mut self, key: SlotKey) {
        let Some(slot) = self.get_mut(key) else {
            return;
        };
        let was_waiting = matches!(slot.state, State::Waiting(_));
        slot.state = State::Free;
        slot.generation = slot.generation.wrapping_add(1);
        if was_waiting {
            self.waiting -= 1;
        }
        self.free.push(key.index);
    }

    /// Fires the slots due at `now` (their wakers into `due`); the
    /// earliest deadline of those left, if any.
    fn fire_due(&mut self, now: Instant, due: &mut Vec<Waker>) -> Option<Instant> {
        let mut earliest: Option<Instant> = None;
        for slot in &mut self.slots {
            if !matches!(slot.state, State::Waiting(_)) {
                continue;
            }
            if slot.deadline <= now {
                if let State::Waiting(waker) = std::mem::replace(&mut slot.state, State::Fired) {
                    due.push(waker);
                }
                self.waiting -= 1;
            } else {
                earliest = Some(earliest.map_or(slot.deadline, |e| e.min(slot.deadline)));
            }
        }
        earliest
    }
}

thread_local! {
    static SLOTS: RefCell<Slots> = RefCell::new(Slots::default());
}

/// `f` over this thread's slots; `R`'s default (nothing done) while the
/// thread is exiting, or if a waker or a spawn made under `f` ever came
/// back here (tokio's do not): never a panic in a sleep's poll or drop.
fn with_slots<R: Default>(f: impl FnOnce(&mut Slots) -> R) -> R {
    SLOTS
        .try_with(|slots| slots.try_borrow_mut().ok().map(|mut slots| f(&mut slots)))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Starts this thread's sweeping task; false outside a runtime.
fn start_sweeping() -> bool {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            drop(runtime.spawn(sweep(Sweeping)));
            true
        }
        Err(_) => false,
    }
}

/// Held by the sweeping task: dropped with it (its runtime shutting down,
/// even before it first ran), it lets the next sleep start another.
struct Sweeping;

impl Drop for Sweeping {
    fn drop(&mut self) {
        with_slots(|slots| slots.sweeping = false);
    }
}

/// Wakes this thread's sleeps as their deadlines pass, while there are
/// some.
async fn sweep(_sweeping: Sweeping) {
    let mut due = Vec::new();
    loop {
        let now = Instant::now();
        let earliest = with_slots(|slots| {
            let earliest = slots.fire_due(now, &mut due);
            if earliest.is_none() && slots.waiting == 0 {
                // Ends here, under the same borrow: a sleep registered
                // after this starts a new sweeper.
                slots.sweeping = false;
                slots.next_look = None;
                None
            } else {
                Some(earliest.unwrap_or(now + LOOK_AT_LEAST_EVERY))
            }
        });
        // Woken outside the borrow: a woken task may run its own sleeps.
        for waker in due.drain(..) {
            waker.wake();
        }
        let Some(earliest) = earliest else {
            return;
        };
        let next_look = earliest.min(now + LOOK_AT_LEAST_EVERY);
        let mut timer = pin!(tokio::time::sleep_until(tokio::time::Instant::from_std(
            next_look
        )));
        let mut armed = false;
        poll_fn(|cx| {
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let sooner = with_slots(|slots| {
                // Taken by a sleep due sooner: look now.
                if armed && slots.next_look.is_none() {
                    slots.early_looks += 1;
                    return true;
                }
                slots.next_look = Some((next_look, cx.waker().clone()));
                false
            });
            armed = true;
            if sooner {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use hyper::rt::Timer as _;

    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    fn poll_once(sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>) -> Poll<()> {
        sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    fn poll_once_pinned<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
        fut.poll(&mut Context::from_waker(Waker::noop()))
    }

    fn waiting() -> usize {
        with_slots(|slots| slots.waiting)
    }

    #[tokio::test]
    async fn sleeps_end_after_their_deadlines_never_before() {
        let start = Instant::now();
        let deadlines: Vec<Instant> = (1..=8)
            .map(|i| start + Duration::from_millis(25 * i))
            .collect();
        let sleeps = deadlines.iter().map(|&deadline| async move {
            SlotTimer.sleep_until(deadline).await;
            Instant::now() >= deadline
        });
        let ended = tokio::time::timeout(WAIT, futures_util::future::join_all(sleeps))
            .await
            .expect("every sleep ends");
        assert_eq!(ended, [true; 8], "none ends before its deadline");
        assert_eq!(waiting(), 0);
    }

    #[tokio::test]
    async fn a_dropped_sleep_gives_its_slot_back_and_the_sweeper_stops() {
        let far = Instant::now() + Duration::from_secs(3600);
        let mut sleeps: Vec<_> = (0..100).map(|_| SlotTimer.sleep_until(far)).collect();
        for sleep in &mut sleeps {
            assert_eq!(poll_once(sleep), Poll::Pending);
        }
        assert_eq!(waiting(), 100);
        assert!(with_slots(|slots| slots.sweeping));
        drop(sleeps);
        assert_eq!(waiting(), 0);
        assert_eq!(with_slots(|slots| slots.free.len()), 100);
        // The sweeper sees nothing left at its next look, and ends.
        tokio::time::timeout(WAIT, async {
            while with_slots(|slots| slots.sweeping) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the sweeper ends");
        // A new sleep starts another, and reuses a slot.
        let mut again = SlotTimer.sleep(Duration::from_millis(20));
        assert_eq!(poll_once(&mut again), Poll::Pending);
        assert_eq!(
            with_slots(|slots| (slots.slots.len(), slots.sweeping)),
            (100, true)
        );
        tokio::time::timeout(WAIT, again).await.expect("it ends");
    }

    #[tokio::test]
    async fn a_timeout_on_a_workers_thread_takes_a_slot() {
        use_on_this_thread();
        let start = Instant::now();
        let mut pending = pin!(timeout(
            Duration::from_millis(40),
            std::future::pending::<()>()
        ));
        assert!(poll_once_pinned(pending.as_mut()).is_pending());
        assert_eq!(waiting(), 1, "a slot, not tokio's wheel");
        let ended = tokio::time::timeout(WAIT, pending).await;
        assert_eq!(ended, Ok(Err(Elapsed)));
        assert!(Instant::now() >= start + Duration::from_millis(40));
        assert_eq!(waiting(), 0);
        let ready = timeout(Duration::from_secs(60), async { 7 }).await;
        assert_eq!(ready, Ok(7));
        assert_eq!(waiting(), 0, "its slot given back");
    }

    /// A timeout counted from a given start ends its duration after that
    /// start, not after the time it was made.
    #[tokio::test]
    async fn a_timeout_from_a_start_on_a_workers_slots_ends_its_duration_after_it() {
        use_on_this_thread();
        let start = Instant::now();
        let duration = Duration::from_secs(3600);
        // Made later than `start`, and counted from it all the same.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let on_slots = timeout_from(start, duration, std::future::pending::<()>());
        let Deadline::Slot(sleep) = &on_slots.deadline else {
            panic!("a worker's timeout is on its slots");
        };
        assert_eq!(sleep.deadline, start + duration);
        // A timeout without a start is counted from when it is made.
        let before = Instant::now();
        let from_now = timeout(duration, std::future::pending::<()>());
        let Deadline::Slot(sleep) = &from_now.deadline else {
            panic!("a worker's timeout is on its slots");
        };
        assert!(sleep.deadline >= before + duration);
    }

    /// On tokio's timer (here paused), a timeout from a start is what is
    /// left of its duration: the time since the start, on the system's
    /// clock, is taken off it.
    #[tokio::test(start_paused = true)]
    async fn a_timeout_from_a_start_on_tokios_timer_is_what_is_left() {
        let start = Instant::now();
        let duration = Duration::from_secs(3600);
        // Real time passes; tokio's paused clock does not.
        std::thread::sleep(Duration::from_millis(5));
        let now = tokio::time::Instant::now();
        let elsewhere = timeout_from(start, duration, std::future::pending::<()>());
        let Deadline::Tokio(sleep) = &elsewhere.deadline else {
            panic!("off a worker's thread, tokio's timer");
        };
        assert!(sleep.deadline() <= now + duration - Duration::from_millis(5));
        assert!(sleep.deadline() > now);
        let from_now = timeout(duration, std::future::pending::<()>());
        let Deadline::Tokio(sleep) = &from_now.deadline else {
            panic!("off a worker's thread, tokio's timer");
        };
        assert_eq!(sleep.deadline(), now + duration);
    }

    #[tokio::test]
    async fn a_timeout_elsewhere_is_tokios() {
        let ended = tokio::time::timeout(
            WAIT,
            timeout(Duration::from_millis(10), std::future::pending::<()>()),
        )
        .await;
        assert_eq!(ended, Ok(Err(Elapsed)));
        assert_eq!(with_slots(|slots| slots.slots.len()), 0, "no slot taken");
    }

    /// The sweeper sleeping until a later deadline is woken by a sleep due
    /// sooner.
    #[tokio::test]
    async fn a_sooner_sleep_wakes_the_sweeper() {
        let mut later = SlotTimer.sleep(Duration::from_secs(60));
        assert_eq!(poll_once(&mut later), Poll::Pending);
        tokio::time::timeout(WAIT, async {
            while with_slots(|slots| slots.next_look.is_none()) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the sweeper sleeps until its next look");
        let deadline = Instant::now() + Duration::from_millis(20);
        let mut sooner = SlotTimer.sleep_until(deadline);
        assert_eq!(poll_once(&mut sooner), Poll::Pending);
        assert!(
            with_slots(|slots| slots.next_look.is_none()),
            "the sweeper was woken to look again"
        );
        tokio::time::timeout(WAIT, sooner).await.expect("it ends");
        assert!(Instant::now() >= deadline);
        assert_eq!(with_slots(|slots| slots.early_looks), 1, "looked at once");
        drop(later);
    }

    /// A runtime shut down before its sweeper first ran leaves no
    /// sweeper thought to be running.
    #[test]
    fn a_runtime_gone_before_its_sweeper_ran_lets_the_next_start_one() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut sleep = SlotTimer.sleep(Duration::from_secs(60));
        runtime.block_on(async { assert_eq!(poll_once(&mut sleep), Poll::Pending) });
        assert!(with_slots(|slots| slots.sweeping));
        drop(runtime);
        assert!(!with_slots(|slots| slots.sweeping));
        drop(sleep);
        assert_eq!(waiting(), 0);
    }

    /// A sleep polled or dropped while the slots are in use (what a
    /// waker that polled at once would do) does nothing, and never panics.
    #[test]
    fn a_nested_use_of_the_slots_does_nothing() {
        SLOTS.with(|slots| {
            let _in_use = slots.borrow_mut();
            let mut sleep = SlotTimer.sleep(Duration::from_millis(1));
            assert_eq!(poll_once(&mut sleep), Poll::Pending);
            drop(sleep);
        });
        assert_eq!(waiting(), 0);
    }

    #[test]
    fn an_old_key_touches_no_newer_sleep_in_its_slot() {
        let mut slots = Slots {
            // No runtime here: nothing to start.
            sweeping: true,
            ..Slots::default()
        };
        let later = Instant::now() + Duration::from_secs(60);
        let old = slots.insert(later, Waker::noop().clone());
        slots.remove(old);
        let new = slots.insert(later, Waker::noop().clone());
        assert_eq!(new.index, old.index, "the slot is reused");
        assert!(slots.poll(old, Waker::noop()), "an old key reads as ended");
        slots.remove(old);
        assert_eq!(slots.waiting, 1, "the newer sleep still waits");
        assert!(!slots.poll(new, Waker::noop()));
        let mut due = Vec::new();
        assert_eq!(slots.fire_due(later, &mut due), None);
        assert_eq!((due.len(), slots.waiting), (1, 0));
        assert!(slots.poll(new, Waker::noop()), "fired");
    }
}
