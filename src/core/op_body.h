#pragma once
// OpBody: what a collective does once the header exchange succeeded, as a move-only callable
// stored in place. The bodies the calls build capture a handful of pointers and sizes; holding
// them in a std::function cost a heap allocation and a free per call (libstdc++ keeps only 16
// bytes in place), a sixth of a small shared-memory call's own work. Larger callables still work:
// they go to the heap.

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace ringlet::collectives {
struct Group;
}
namespace ringlet::transport {
struct WaitContext;
}

namespace ringlet::detail {

class OpBody {
 public:
  // Bytes held in place; a callable that is larger (or aligned more strictly) is kept on the heap.
  static constexpr size_t kInlineBytes = 64;

  OpBody() = default;
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, OpBody> &&
           std::is_invocable_v<std::decay_t<F>&, const collectives::Group&,
                               const transport::WaitContext&>)
      OpBody(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    using Callable = std::decay_t<F>;
    if constexpr (sizeof(Callable) <= kInlineBytes && alignof(Callable) <= alignof(Storage) &&
                  std::is_nothrow_move_constructible_v<Callable>) {
      new (&storage_) Callable(std::forward<F>(f));
      ops_ = &kOps<Callable>;
    } else {
      using Boxed = std::unique_ptr<Callable>;
      new (&storage_) Boxed(std::make_unique<Callable>(std::forward<F>(f)));
      ops_ = &kBoxedOps<Callable>;
    }
  }
  OpBody(OpBody&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) ops_->relocate(&storage_, &other.storage_);
    other.ops_ = nullptr;
  }
  OpBody& operator=(OpBody&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      if (ops_ != nullptr) ops_->relocate(&storage_, &other.storage_);
      other.ops_ = nullptr;
    }
    return *this;
  }
  OpBody(const OpBody&) = delete;
  OpBody& operator=(const OpBody&) = delete;
  ~OpBody() { reset(); }

  // Calls the body (which must be set).
  void operator()(const collectives::Group& group, const transport::WaitContext& wait) const {
    ops_->invoke(&storage_, group, wait);
  }

 private:
  struct alignas(std::max_align_t) Storage {
    std::byte bytes[kInlineBytes];
  };
  struct Ops {
    void (*invoke)(void* self, const collectives::Group&, const transport::WaitContext&);
    void (*relocate)(void* to, void* from) noexcept;  // move-construct at `to`, destroy `from`
    void (*destroy)(void* self) noexcept;
  };
  template <typename T>
  static void relocate(void* to, void* from) noexcept {
    new (to) T(std::move(*static_cast<T*>(from)));
    static_cast<T*>(from)->~T();
  }
  template <typename T>
  static void destroy(void* self) noexcept {
    static_cast<T*>(self)->~T();
  }
  template <typename Callable>
  static void invoke(void* self, const collectives::Group& group,
                     const transport::WaitContext& wait) {
    (*static_cast<Callable*>(self))(group, wait);
  }
  template <typename Callable>
  static void invokeBoxed(void* self, const collectives::Group& group,
                          const transport::WaitContext& wait) {
    (**static_cast<std::unique_ptr<Callable>*>(self))(group, wait);
  }
  template <typename Callable>
  static constexpr Ops kOps = {&invoke<Callable>, &relocate<Callable>, &destroy<Callable>};
  template <typename Callable>
  static constexpr Ops kBoxedOps = {&invokeBoxed<Callable>, &relocate<std::unique_ptr<Callable>>,
                                    &destroy<std::unique_ptr<Callable>>};

  void reset() noexcept {
    if (ops_ != nullptr) ops_->destroy(&storage_);
    ops_ = nullptr;
  }

  mutable Storage storage_;
  const Ops* ops_ = nullptr;
};

}  // namespace ringlet::detail
