//! The wasm-bindgen-test suite of the SDK's WebAssembly runtime, run in Node, plus the
//! Node-only check that background timers do not keep the process alive.
//!
//! `scripts/test-wasm.sh` runs it against a real lock-server; by hand:
//! `LOCK_TEST_URL=http://127.0.0.1:PORT wasm-pack test --mode no-install --node` (see
//! `wasm_suite`, and `lock-wasm/README.md` for the exact commands the suite runs).
#![cfg(target_arch = "wasm32")]

mod wasm_suite;

mod node_timers {
    use std::time::Duration;

    use lock_wasm::clock::Clock;
    use lock_wasm::wasm::timer::{Sleep, TimerKind};
    use lock_wasm::wasm::JsClock;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen]
    extern "C" {
        // Lists one "Timeout" per timer that keeps the event loop alive (unref'd ones are
        // not listed).
        #[wasm_bindgen(js_namespace = process, js_name = getActiveResourcesInfo)]
        fn active_resources() -> js_sys::Array;
    }

    fn referenced_timers() -> usize {
        active_resources()
            .iter()
            .filter(|r| r.as_string().as_deref() == Some("Timeout"))
            .count()
    }

    const LONG: Duration = Duration::from_secs(3_600);

    /// A background timer (the heartbeat task's) is unref'd; a foreground one is not, and
    /// dropping either clears it.
    #[wasm_bindgen_test]
    fn only_foreground_timers_keep_node_alive() {
        let before = referenced_timers();
        let foreground = Sleep::new(LONG, TimerKind::Foreground);
        assert_eq!(referenced_timers(), before + 1);
        let background = Sleep::new(LONG, TimerKind::Background);
        assert_eq!(referenced_timers(), before + 1);
        drop(foreground);
        drop(background);
        assert_eq!(referenced_timers(), before);
    }

    /// `JsClock`'s background sleeps (what the heartbeat task waits on, through the
    /// session's `BackgroundClock`) are unref'd; its ordinary sleeps are not.
    #[wasm_bindgen_test]
    fn js_clock_background_sleeps_are_unrefd() {
        let before = referenced_timers();
        let background = JsClock.background_sleep(LONG);
        assert_eq!(referenced_timers(), before);
        let foreground = JsClock.sleep(LONG);
        assert_eq!(referenced_timers(), before + 1);
        drop((background, foreground));
    }
}
