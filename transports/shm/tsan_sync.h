#pragma once
// Happens-before for ThreadSanitizer where two thread ranks of one process hand each other a
// buffer through the segment. Each link maps the segment on its own, so the two sides' atomics
// (a cell's word, the post's state) sit at different virtual addresses and TSan, which matches
// a release with an acquire by address, sees no order between them. That never mattered for
// the slots (each side touches them through its own mapping too), but lent messages (the
// receiver reads the sender's buffer) and direct writes (the sender writes the receiver's) touch
// one caller buffer from both threads: without these marks `scripts/sanitize.sh tsan` reported
// every such hand-off as a race. The key is the caller buffer's address, which both sides know.
// Nothing in other builds.

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGLET_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(RINGLET_TSAN)
#define RINGLET_TSAN 1
#endif

#ifdef RINGLET_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace ringlet::transport::shm::tsan {

// What this thread did to the buffer at `key` happens before what a thread does after
// acquire(key).
inline void release([[maybe_unused]] const void* key) {
#ifdef RINGLET_TSAN
  __tsan_release(const_cast<void*>(key));
#endif
}

inline void acquire([[maybe_unused]] const void* key) {
#ifdef RINGLET_TSAN
  __tsan_acquire(const_cast<void*>(key));
#endif
}

inline constexpr bool kEnabled =
#ifdef RINGLET_TSAN
    true;
#else
    false;
#endif

}  // namespace ringlet::transport::shm::tsan
