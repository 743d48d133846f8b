//! Gauge behaviour under tokio's paused clock.

use super::*;
use crate::resource::Kind;
use crate::resource::{Handle, Shared};
use doorman_core::client::Mode;
use std::time::Duration;
use tokio::time::sleep;

fn gauge(capacity: f64, wants: Wants) -> GaugeResource {
    let shared = Shared::detached(Kind::Gauge, wants, Duration::ZERO);
    shared.apply(capacity, Mode::Lease);
    GaugeResource {
        shared: Handle(shared),
    }
}

#[tokio::test(start_paused = true)]
async fn permits_are_bounded_and_released_on_drop() {
    let g = gauge(2.9, Wants::Fixed(2.0));
    assert_eq!(g.capacity(), 2.9);
    let a = g.try_mark().expect("first");
    let b = g.mark().await;
    assert!(g.try_mark().is_none(), "2.9 rounds down to 2 permits");
    assert_eq!(g.in_flight(), 2);
    drop(a);
    let c = g.try_mark().expect("freed by drop");
    b.release();
    c.release();
    assert_eq!(g.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn shrinking_makes_new_marks_wait_until_enough_are_released() {
    let g = gauge(3.0, Wants::Fixed(3.0));
    let held: Vec<_> = (0..3).map(|_| g.try_mark().unwrap()).collect();
    g.shared.apply(1.0, Mode::Lease);
    let g2 = GaugeResource {
        shared: Handle(g.shared.0.clone()),
    };
    let waiter = tokio::spawn(async move {
        let p = g2.mark().await;
        drop(p);
    });
    let mut held = held.into_iter();
    drop(held.next());
    sleep(Duration::from_millis(10)).await;
    assert!(!waiter.is_finished(), "2 in flight, capacity 1");
    drop(held.next());
    sleep(Duration::from_millis(10)).await;
    assert!(!waiter.is_finished(), "1 in flight, capacity 1");
    drop(held.next());
    tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("waiter gets the permit once in flight < capacity")
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_dropped_mark_future_is_not_counted_as_waiting() {
    let g = gauge(1.0, Wants::Auto);
    let p = g.try_mark().unwrap();
    {
        let fut = g.mark();
        tokio::pin!(fut);
        let r = tokio::time::timeout(Duration::from_millis(5), fut.as_mut()).await;
        assert!(r.is_err());
    }
    match &g.shared.lock().limiter {
        Limiter::Gauge(st) => assert_eq!((st.in_flight, st.waiting), (1, 0)),
        Limiter::Rate(_) => unreachable!(),
    }
    drop(p);
}

#[tokio::test(start_paused = true)]
async fn auto_wants_is_the_peak_demand() {
    let g = gauge(2.0, Wants::Auto);
    let a = g.try_mark().unwrap();
    let b = g.try_mark().unwrap();
    let g2 = GaugeResource {
        shared: Handle(g.shared.0.clone()),
    };
    let waiter = tokio::spawn(async move {
        let p = g2.mark().await;
        drop(p);
    });
    sleep(Duration::from_millis(10)).await;
    assert_eq!(g.current_wants(), 3.0, "2 in flight + 1 waiting");
    drop(a);
    drop(b);
    waiter.await.unwrap();
    sleep(Duration::from_secs(20)).await;
    assert_eq!(g.current_wants(), 0.0, "the peak ages out of the window");
}
