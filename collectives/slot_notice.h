#pragma once
// The 24-byte notices of the slot ring (slot_ring.h) and the direct all-to-all (slot_mesh.h):
// "I wrote your slot k" and "I am done with my slot k", sent over the host Links.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringlet::collectives::detail {

constexpr uint32_t kNoticeMagic = 0x52475354;  // "RGST"
constexpr size_t kNoticeBytes = 24;
using NoticeBytes = std::array<std::byte, kNoticeBytes>;

enum class NoticeKind : uint8_t { kWritten = 1, kFreed = 2 };

// One notice on the wire: magic, kind, slot, the message's sequence number within the call, and
// its size in bytes. Host byte order: both ends are on one node.
struct Notice {
  NoticeKind kind = NoticeKind::kWritten;
  uint16_t slot = 0;
  uint64_t seq = 0;
  uint64_t bytes = 0;

  NoticeBytes encode() const {
    NoticeBytes out{};
    std::memcpy(out.data(), &kNoticeMagic, 4);
    out[4] = static_cast<std::byte>(kind);
    std::memcpy(out.data() + 6, &slot, 2);
    std::memcpy(out.data() + 8, &seq, 8);
    std::memcpy(out.data() + 16, &bytes, 8);
    return out;
  }
  static bool decode(const NoticeBytes& in, Notice& out) {
    uint32_t magic = 0;
    std::memcpy(&magic, in.data(), 4);
    out.kind = static_cast<NoticeKind>(in[4]);
    std::memcpy(&out.slot, in.data() + 6, 2);
    std::memcpy(&out.seq, in.data() + 8, 8);
    std::memcpy(&out.bytes, in.data() + 16, 8);
    return magic == kNoticeMagic &&
           (out.kind == NoticeKind::kWritten || out.kind == NoticeKind::kFreed);
  }
};

}  // namespace ringlet::collectives::detail
