//! The npm module's global allocator (feature `wasm` only): lol_alloc's free-list allocator
//! instead of the default dlmalloc.
//!
//! Why: it is about 3 KB smaller gzipped, which keeps the shipped .wasm under its 80 KB
//! budget (docs/BENCHMARKS.md). Its O(free-list length) cost does not matter here: the SDK
//! holds a handful of small allocations per session and its hot path waits on the network.
//! Only the npm cdylib sets it; a Rust wasm app using the SDK keeps its own allocator.

// SAFETY: wasm32-unknown-unknown without the atomics feature has exactly one thread per
// instance, which is the condition AssumeSingleThreaded requires.
#[global_allocator]
static ALLOCATOR: lol_alloc::AssumeSingleThreaded<lol_alloc::FreeListAllocator> =
    unsafe { lol_alloc::AssumeSingleThreaded::new(lol_alloc::FreeListAllocator::new()) };
