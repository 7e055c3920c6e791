//! A software prefetch hint: the one `unsafe` of this crate.

/// Asks the CPU to bring the cache line holding `*r` towards L1 without
/// waiting for it. A hint only: no value is read, nothing can fault.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs the `sse` target feature, which every
    // x86_64 CPU has (it is in the x86_64 baseline the compiler targets). The
    // prefetch instruction does not access memory architecturally and never
    // faults, whatever the address; here it is even a valid reference.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
