//! Reading a request body into memory, bounded twice: by the integration's limit (413)
//! and by one budget shared by every request in flight (503 + `Retry-After` when full).
//!
//! The body lands in one buffer. Each frame is copied in and dropped at once, so a body
//! sent as a million one-byte chunks costs what a body sent in one piece costs — never
//! one allocation or one pinned read buffer per frame. The buffer starts at 16 KiB (or
//! the declared `Content-Length`, when smaller) and doubles as bytes arrive, up to the
//! declared length (or the limit, when none is declared): a sender holds at most 16 KiB,
//! or twice what it has sent. Every byte of capacity is reserved from the [`BodyBudget`]
//! before it is allocated, and the reservation lives as long as the body: until the
//! request is answered and the body has left the group-commit queue.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The first buffer allocated for a body of unknown or larger size.
const INITIAL_CAPACITY_BYTES: usize = 16 * 1024;

/// Bytes of request bodies the whole process may hold at once.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total_bytes: usize,
}

impl BodyBudget {
    /// A budget of `total_bytes` (at most `u32::MAX` bytes).
    pub fn new(total_bytes: usize) -> Self {
        let total_bytes = total_bytes.min(u32::MAX as usize);
        Self {
            permits: Arc::new(Semaphore::new(total_bytes)),
            total_bytes,
        }
    }

    /// The budget's size.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Bytes not reserved by any body right now.
    pub fn available_bytes(&self) -> usize {
        self.permits.available_permits()
    }

    /// Reserves `bytes` more for a text read out of a body (GitHub's form payload), or
    /// `None` when the budget cannot hold them now.
    pub fn try_reserve(&self, bytes: usize) -> Option<Reservation> {
        let permits = u32::try_from(bytes).ok()?;
        Arc::clone(&self.permits)
            .try_acquire_many_owned(permits)
            .ok()
            .map(|permit| Reservation { _permit: permit })
    }
}

/// Bytes of the [`BodyBudget`] held until dropped.
#[derive(Debug)]
pub struct Reservation {
    _permit: OwnedSemaphorePermit,
}

/// A payload read out of a body (GitHub's form `payload`), held within the budget like
/// the body it came from.
#[derive(Debug)]
pub struct HeldText {
    text: String,
    _reservation: Reservation,
}

impl HeldText {
    /// `text`, counted against `reservation` (at least its length).
    pub fn new(text: String, reservation: Reservation) -> Self {
        Self {
            text,
            _reservation: reservation,
        }
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A body read in full, with its share of the budget.
#[derive(Debug)]
pub struct HeldBody {
    bytes: Bytes,
    _reservation: Option<OwnedSemaphorePermit>,
}

impl HeldBody {
    /// The body's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// A body outside any budget (for tests of what reads one).
    #[cfg(test)]
    pub(crate) fn unbudgeted(bytes: Bytes) -> Self {
        Self {
            bytes,
            _reservation: None,
        }
    }
}

/// Why a body was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Declared or streamed past the integration's limit (413).
    #[error("the body is larger than the integration's limit")]
    TooLarge,
    /// The in-flight budget cannot hold it now (503, retry later).
    #[error("the in-flight body budget is full")]
    BudgetFull,
    /// The connection failed while the body streamed (400).
    #[error("the request body could not be read")]
    Unreadable,
}

/// Reads `body` whole into one buffer. `declared` is the `Content-Length`, if any; a body
/// declared or streaming past `limit` bytes is refused as soon as that is known.
pub async fn read_body<B>(
    body: B,
    declared: Option<u64>,
    limit: usize,
    budget: &BodyBudget,
) -> Result<HeldBody, BodyError>
where
    B: hyper::body::Body + Unpin,
{
    let ceiling = match declared {
        Some(length) if length > limit as u64 => return Err(BodyError::TooLarge),
        // `length` ≤ `limit`, which is a usize.
        Some(length) => usize::try_from(length).unwrap_or(limit),
        None => limit,
    };
    let mut buffer = Vec::new();
    let mut reservation: Option<OwnedSemaphorePermit> = None;
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Unreadable)?;
        let Ok(mut data) = frame.into_data() else {
            // Trailers carry nothing we read.
            continue;
        };
        let needed = buffer.len() + data.remaining();
        if needed > ceiling {
            return Err(if needed > limit {
                BodyError::TooLarge
            } else {
                // More than the declared length: hyper ends the body at the declared
                // length, so this is a body that lies about itself.
                BodyError::Unreadable
            });
        }
        if needed > buffer.capacity() {
            let capacity = needed
                .max(buffer.capacity() * 2)
                .max(INITIAL_CAPACITY_BYTES)
                .min(ceiling);
            reserve(budget, &mut reservation, capacity)?;
            buffer.reserve_exact(capacity - buffer.len());
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            buffer.extend_from_slice(chunk);
            let advanced = chunk.len();
            data.advance(advanced);
        }
    }
    Ok(HeldBody {
        bytes: Bytes::from(buffer),
        _reservation: reservation,
    })
}

/// Grows `reservation` to `capacity` bytes of the budget, or refuses without waiting.
fn reserve(
    budget: &BodyBudget,
    reservation: &mut Option<OwnedSemaphorePermit>,
    capacity: usize,
) -> Result<(), BodyError> {
    let held = reservation
        .as_ref()
        .map_or(0, OwnedSemaphorePermit::num_permits);
    let more = u32::try_from(capacity.saturating_sub(held)).map_err(|_| BodyError::BudgetFull)?;
    if more == 0 {
        return Ok(());
    }
    let granted = Arc::clone(&budget.permits)
        .try_acquire_many_owned(more)
        .map_err(|_| BodyError::BudgetFull)?;
    match reservation {
        Some(held) => held.merge(granted),
        None => *reservation = Some(granted),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use hyper::body::Frame;

    use super::*;

    /// A payload read out of a body (GitHub's form) is held within the same budget.
    #[test]
    fn a_text_read_out_of_a_body_is_reserved_from_the_budget() {
        let budget = BodyBudget::new(10);
        let held = HeldText::new("{}".to_owned(), budget.try_reserve(6).expect("room"));
        assert_eq!(held.text(), "{}");
        assert_eq!(budget.available_bytes(), 4);
        assert!(budget.try_reserve(6).is_none(), "the budget is spent");
        drop(held);
        assert_eq!(budget.available_bytes(), 10);
    }

    /// A body delivered as the given chunks, one frame each.
    struct Chunks(VecDeque<Bytes>);

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(|chunk| Ok(Frame::data(chunk))))
        }
    }

    fn one_byte_chunks(length: usize) -> Chunks {
        Chunks((0..length).map(|_| Bytes::from_static(b"x")).collect())
    }

    #[tokio::test]
    async fn one_byte_chunks_land_in_one_buffer_no_larger_than_the_body() {
        let budget = BodyBudget::new(1 << 20);
        let held = read_body(one_byte_chunks(100_000), None, 1 << 20, &budget)
            .await
            .expect("read");
        assert_eq!(held.bytes().len(), 100_000);
        // Geometric growth from 16 KiB: the reservation covers the buffer's capacity,
        // which is less than twice the body.
        let reserved = budget.total_bytes() - budget.available_bytes();
        assert!(
            (100_000..200_000).contains(&reserved),
            "reserved {reserved}"
        );
        drop(held);
        assert_eq!(budget.available_bytes(), budget.total_bytes());
    }

    #[tokio::test]
    async fn a_declared_length_is_the_buffer_size() {
        let budget = BodyBudget::new(1 << 20);
        let held = read_body(one_byte_chunks(50_000), Some(50_000), 1 << 20, &budget)
            .await
            .expect("read");
        assert_eq!(held.bytes().len(), 50_000);
        assert_eq!(budget.total_bytes() - budget.available_bytes(), 50_000);
    }

    #[tokio::test]
    async fn past_the_limit_is_too_large_declared_or_streamed() {
        let budget = BodyBudget::new(1 << 20);
        let declared = read_body(one_byte_chunks(10), Some(5_000), 4_096, &budget).await;
        assert_eq!(declared.err(), Some(BodyError::TooLarge));
        let streamed = read_body(one_byte_chunks(5_000), None, 4_096, &budget).await;
        assert_eq!(streamed.err(), Some(BodyError::TooLarge));
        assert_eq!(budget.available_bytes(), budget.total_bytes());
    }

    /// One byte, then nothing: a sender that stalls.
    struct Stalls(bool);

    impl hyper::body::Body for Stalls {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.0 {
                return Poll::Pending;
            }
            self.0 = true;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{")))))
        }
    }

    #[tokio::test]
    async fn a_stalled_sender_holds_its_declared_length_of_the_budget() {
        let budget = BodyBudget::new(8_200);
        let reading = tokio::spawn({
            let budget = budget.clone();
            async move { read_body(Stalls(false), Some(4_000), 4_096, &budget).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(budget.available_bytes(), 4_200);
        reading.abort();
        let _ = reading.await;
        assert_eq!(
            budget.available_bytes(),
            8_200,
            "released when the request ends"
        );
    }

    #[tokio::test]
    async fn a_full_budget_refuses_without_waiting_and_frees_on_drop() {
        let budget = BodyBudget::new(40_000);
        let first = read_body(one_byte_chunks(30_000), Some(30_000), 1 << 20, &budget)
            .await
            .expect("fits");
        let second = read_body(one_byte_chunks(30_000), Some(30_000), 1 << 20, &budget).await;
        assert_eq!(second.err(), Some(BodyError::BudgetFull));
        drop(first);
        read_body(one_byte_chunks(30_000), Some(30_000), 1 << 20, &budget)
            .await
            .expect("fits once the first is gone");
    }
}
