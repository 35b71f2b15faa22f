//! Futures boxed where they are built.
//!
//! A future's size is that of its largest state, kilobytes for a
//! request's exchange, and `Box::pin(future)` builds the future on the
//! stack first and then copies all of its size into the box, although
//! before its first poll it holds only its arguments. Written into a box
//! allocated beforehand (`Box::new_uninit` then `Box::write`, with the
//! call that makes the future as the argument), the compiler stores those
//! arguments straight into the heap: no copy. The call must be written
//! inside the macro: a function taking the future as a parameter would
//! have it built, and copied, before the call.

/// `Box::pin($make)`, with `$make` built in the box rather than copied
/// into it (see the module's docs).
macro_rules! boxed_in_place {
    ($make:expr) => {
        ::std::boxed::Box::into_pin(::std::boxed::Box::write(
            ::std::boxed::Box::new_uninit(),
            $make,
        ))
    };
}

pub(crate) use boxed_in_place;

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;

    #[tokio::test]
    async fn a_future_boxed_in_place_runs_as_it_would_unboxed() {
        let words = String::from("in place");
        let future: Pin<Box<_>> = boxed_in_place!(async move {
            tokio::task::yield_now().await;
            words.len()
        });
        let dynamic: Pin<Box<dyn Future<Output = usize> + Send>> = future;
        assert_eq!(dynamic.await, "in place".len());
    }
}
