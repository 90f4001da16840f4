// The Plan: manifest arithmetic, both lifecycles, every invalid transition as an explicit
// error, and the negative controls of reference 004 Table 7 at the unit level (short read,
// EIO, out-of-order valid completions, stale generation, wrong object, held consumer, reset
// with outstanding reads, shutdown with a live consumer, a failed extent inside a bundle).
// Each control asserts what is published, what is rejected, and that every window, slot,
// ticket and consumer balances at the end. Completions are built by hand: no I/O here.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <cstring>
#include <thread>

#include "adapters/synthetic/pattern.hpp"
#include "core/alloc_count.hpp"
#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "plan/manifest.hpp"
#include "plan/state.hpp"

namespace resid {
// White-box access for the negative controls of the invariant checker itself.
struct PlanTestAccess {
  static void set_landed(Plan& p, int32_t slot, uint64_t v) { p.slots_[static_cast<size_t>(slot)].landed = v; }
  static void set_consumers(Plan& p, int32_t slot, uint32_t v) { p.slots_[static_cast<size_t>(slot)].consumers = v; }
  static void set_window(Plan& p, int32_t w, WindowPhase ph) { p.windows_[static_cast<size_t>(w)] = ph; }
};
}  // namespace resid

using namespace resid;

namespace {

constexpr uint64_t kFile = 1u << 20;
constexpr uint32_t kAlign = 512;
constexpr uint64_t kWin = 64u << 10;

// Objects: A = one extent of 100000 bytes at 1000 (2 pieces), B = two extents (3 pieces),
// C = one small unaligned extent (1 piece), D = 4 pieces of 64 KiB.
std::vector<PlanObjectSpec> specs() {
  return {
      {"A", {{1000, 100000}}, std::nullopt},
      {"B", {{200000, 70000}, {300000, 5000}}, 75000},
      {"C", {{400001, 777}}, std::nullopt},
      {"D", {{524288, 4 * kWin}}, std::nullopt},
  };
}

// The byte a window holds for file offset o: distinct per offset, so a misplaced copy shows.
std::byte file_byte(uint64_t o) { return static_cast<std::byte>((o * 131 + (o >> 8)) & 0xff); }

class PlanTest : public ::testing::Test {
 protected:
  void make(uint32_t windows, uint32_t slots, uint32_t consumers, uint32_t max_bundle, bool eager = true,
            bool open = false) {
    m_ = PlanManifest::build(specs(), kFile, kAlign, kWin);
    slot_bytes_ = m_.slot_bytes_needed();
    arena_.assign(slot_bytes_ * slots, std::byte{0});
    win_.assign(windows, std::vector<std::byte>(kWin));
    PlanConfig c;
    c.windows = windows;
    for (uint32_t i = 0; i < slots; ++i) c.slot_addresses.push_back(arena_.data() + i * slot_bytes_);
    c.slot_bytes = slot_bytes_;
    c.consumers = consumers;
    c.max_bundle = max_bundle;
    c.eager_reconcile = eager;
    c.open_consumers = open;
    plan_ = std::make_unique<Plan>(m_, c);
  }
  void TearDown() override {
    if (!plan_) return;
    const PlanCounters c = plan_->counters();
    EXPECT_EQ(c.reconcile_violations, 0u) << plan_->first_violation();
  }

  // A completion for piece `p` that landed in window `w` with ticket `tag`.
  Completion comp(uint64_t tag, int32_t w, uint32_t p, RejectReason r = RejectReason::None) {
    const PlanPiece& pc = m_.piece(p);
    auto& buf = win_[static_cast<size_t>(w)];
    for (uint64_t i = 0; i < pc.length; ++i) buf[i] = file_byte(pc.offset + i);
    Completion c;
    c.tag = tag;
    c.window = w;
    c.extent = pc.extent_range();
    c.reason = r;
    if (r == RejectReason::None) c.data = buf.data();
    else c.error = "rejected";
    return c;
  }
  // Accept + copy.
  EndCopyVerdict land(uint64_t tag) {
    auto o = plan_->begin_copy(tag);
    EXPECT_TRUE(o.ok()) << to_string(o.error);
    if (!o.ok()) return {};
    std::memcpy(o.value.dst, o.value.src, o.value.bytes);
    auto e = plan_->end_copy(tag);
    EXPECT_TRUE(e.ok()) << to_string(e.error);
    return e.value;
  }
  // Reads every piece of a one-object bundle in order through window 0.., landing each.
  BundleHandle load(uint32_t object, uint64_t tag) {
    auto b = plan_->request(&object, &tag, 1);
    EXPECT_TRUE(b.ok()) << to_string(b.error);
    const int32_t slot = plan_->bundle_slot(b.value, 0).value;
    const PlanObject& o = m_.object(object);
    for (uint32_t i = 0; i < o.pieces; ++i) {
      auto t = plan_->begin_read(b.value, slot, o.first_piece + i, 0);
      EXPECT_TRUE(t.ok()) << to_string(t.error);
      auto v = plan_->complete_read(comp(t.value, 0, o.first_piece + i));
      EXPECT_TRUE(v.ok()) << to_string(v.error);
      const auto e = land(t.value);
      EXPECT_EQ(e.bundle_complete, i + 1 == o.pieces);
    }
    return b.value;
  }
  bool slot_holds(int32_t slot, uint32_t object) {
    const PlanObject& o = m_.object(object);
    const std::byte* base = arena_.data() + static_cast<uint64_t>(slot) * slot_bytes_;
    for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
      const PlanExtent& e = m_.extents()[x];
      for (uint64_t i = 0; i < e.length; ++i)
        if (base[e.slot_offset + i] != file_byte(e.offset + i)) return false;
    }
    return true;
  }
  void expect_balanced_after_shutdown() {
    ASSERT_EQ(plan_->shutdown(), PlanError::None);
    const PlanBalance b = plan_->balance();
    EXPECT_TRUE(b.balanced()) << "live tickets " << b.live_tickets << ", windows free " << b.windows_free << "/"
                              << b.windows << ", slots vacant " << b.slots_vacant << "/" << b.slots;
    EXPECT_TRUE(b.tickets_balanced);
    EXPECT_TRUE(b.consumers_balanced);
  }
  uint64_t errors(PlanError e) { return plan_->counters().errors[static_cast<size_t>(e)]; }

  PlanManifest m_ = PlanManifest::build(specs(), kFile, kAlign, kWin);
  uint64_t slot_bytes_ = 0;
  std::vector<std::byte> arena_;
  std::vector<std::vector<std::byte>> win_;
  std::unique_ptr<Plan> plan_;
};

}  // namespace

// ---- the manifest ---------------------------------------------------------------------------

TEST(PlanManifest, PiecesAlignedBytesAndPadding) {
  const PlanManifest m = PlanManifest::build(specs(), kFile, kAlign, kWin);
  ASSERT_EQ(m.object_count(), 4u);
  const PlanObject& a = m.object(0);
  EXPECT_EQ(a.logical_bytes, 100000u);
  // [1000, 101000) -> aligned [512, 101376): 100864 bytes in two window-sized pieces.
  EXPECT_EQ(a.aligned_bytes, 101376u - 512u);
  EXPECT_EQ(a.padding_bytes, a.aligned_bytes - a.logical_bytes);
  ASSERT_EQ(a.pieces, 2u);
  EXPECT_EQ(m.piece(0).offset, 1000u);
  EXPECT_EQ(m.piece(0).aligned_offset, 512u);
  EXPECT_EQ(m.piece(0).aligned_length, kWin);
  EXPECT_EQ(m.piece(1).offset, 512u + kWin);
  EXPECT_EQ(m.piece(0).length + m.piece(1).length, 100000u);
  const PlanObject& b = m.object(1);
  EXPECT_EQ(b.extents, 2u);
  EXPECT_EQ(b.logical_bytes, 75000u);
  EXPECT_EQ(m.extents()[b.first_extent + 1].slot_offset % kSlotExtentAlign, 0u);
  EXPECT_GE(m.extents()[b.first_extent + 1].slot_offset, 70000u);
  EXPECT_EQ(m.object(3).pieces, 4u);
  EXPECT_EQ(m.object(3).padding_bytes, 0u);
  uint64_t logical = 0, aligned = 0;
  for (const auto& o : m.objects()) {
    logical += o.logical_bytes;
    aligned += o.aligned_bytes;
    EXPECT_LE(o.slot_bytes, m.slot_bytes_needed());
    EXPECT_LE(o.aligned_bytes, m.slot_bytes_needed());
  }
  EXPECT_EQ(m.logical_bytes(), logical);
  EXPECT_EQ(m.aligned_bytes(), aligned);
  for (const auto& p : m.pieces()) EXPECT_LE(p.aligned_length, kWin);
  EXPECT_EQ(m.object_of_piece_range(m.piece(2).extent_range()), 1u);
  EXPECT_FALSE(m.object_of_piece_range(Extent{1, 2}).has_value());
}

TEST(PlanManifest, BadInputIsAnInputError) {
  auto build = [](std::vector<PlanObjectSpec> s) { return PlanManifest::build(std::move(s), kFile, kAlign, kWin); };
  EXPECT_THROW(build({}), InputError);
  EXPECT_THROW(build({{"x", {}, std::nullopt}}), InputError);
  EXPECT_THROW(build({{"x", {{0, 0}}, std::nullopt}}), InputError);
  EXPECT_THROW(build({{"x", {{kFile - 10, 11}}, std::nullopt}}), InputError);             // past EOF
  EXPECT_THROW(build({{"x", {{UINT64_MAX - 1, 4}}, std::nullopt}}), InputError);          // offset overflow
  EXPECT_THROW(build({{"x", {{0, 100}}, 99}}), InputError);                                // size disagreement
  EXPECT_THROW(build({{"x", {{0, 100}}, std::nullopt}, {"x", {{0, 100}}, std::nullopt}}), InputError);
  EXPECT_THROW(build({{"", {{0, 100}}, std::nullopt}}), InputError);
  EXPECT_THROW(PlanManifest::build(specs(), kFile, 3, kWin), InputError);
  EXPECT_THROW(PlanManifest::build(specs(), kFile, 4096, 6000), InputError);
}

// ---- the ordinary lifecycle -----------------------------------------------------------------

TEST_F(PlanTest, OrdinaryLifecyclePublishesExactBytesAndCloses) {
  make(2, 2, 2, 1);
  const BundleHandle b = load(1, 7);
  EXPECT_EQ(plan_->publish(b), PlanError::None);
  const int32_t slot = 0;
  EXPECT_EQ(plan_->slot_phase(slot), SlotPhase::DeviceReady);
  EXPECT_TRUE(slot_holds(slot, 1));
  auto c1 = plan_->acquire(7, 1);
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(c1.value.data, arena_.data());
  EXPECT_EQ(plan_->slot_phase(slot), SlotPhase::InUse);
  auto c2 = plan_->acquire(7, 1);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(plan_->slot_consumers(slot), 2u);
  EXPECT_EQ(plan_->release(c1.value), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(slot), SlotPhase::InUse);
  EXPECT_EQ(plan_->release(c2.value), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(slot), SlotPhase::Recyclable);
  EXPECT_EQ(plan_->recycle(slot), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(slot), SlotPhase::Vacant);
  const PlanCounters c = plan_->counters();
  EXPECT_EQ(c.objects_published, 1u);
  EXPECT_EQ(c.bytes_published, 75000u);
  EXPECT_EQ(c.tickets_issued, 3u);
  EXPECT_EQ(c.tickets_copied, 3u);
  EXPECT_GT(c.reconcile_checks, c.transitions - 1);
  // The slot's next version has a new generation at the same stable address.
  const uint64_t g = plan_->slot_generation(slot);
  load(0, 8);
  EXPECT_EQ(plan_->slot_generation(slot), g + 1);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, WindowLifecycleIsFreeReadingHostReadyCopyingFree) {
  make(1, 1, 1, 1);
  uint32_t obj = 2;
  uint64_t tag = 0;
  auto b = plan_->request(&obj, &tag, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::Free);
  auto t = plan_->begin_read(b.value, 0, m_.object(2).first_piece, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::Reading);
  ASSERT_TRUE(plan_->complete_read(comp(t.value, 0, m_.object(2).first_piece)).ok());
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::HostReady);
  auto o = plan_->begin_copy(t.value);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::Copying);
  std::memcpy(o.value.dst, o.value.src, o.value.bytes);
  ASSERT_TRUE(plan_->end_copy(t.value).ok());
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::Free);
  ASSERT_EQ(plan_->publish(b.value), PlanError::None);
  auto c = plan_->acquire(0, 2);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(plan_->release(c.value), PlanError::None);
  expect_balanced_after_shutdown();
}

// ---- every invalid transition is an explicit error and changes nothing ---------------------

TEST_F(PlanTest, InvalidWindowTransitionsAreErrors) {
  make(2, 2, 1, 1);
  uint32_t obj = 0;
  uint64_t tag = 1;
  auto b = plan_->request(&obj, &tag, 1);
  ASSERT_TRUE(b.ok());
  const uint32_t p0 = m_.object(0).first_piece;
  auto t = plan_->begin_read(b.value, 0, p0, 0);
  ASSERT_TRUE(t.ok());
  // READING window: cannot take another read, cannot be copied or finish a copy.
  EXPECT_EQ(plan_->begin_read(b.value, 0, p0 + 1, 0).error, PlanError::InvalidTransition);
  EXPECT_EQ(plan_->begin_copy(t.value).error, PlanError::InvalidTransition);
  EXPECT_EQ(plan_->end_copy(t.value).error, PlanError::InvalidTransition);
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::Reading);
  ASSERT_TRUE(plan_->complete_read(comp(t.value, 0, p0)).ok());
  // HOST_READY: a second completion of the same read is refused; end_copy needs COPYING.
  EXPECT_EQ(plan_->complete_read(comp(t.value, 0, p0)).error, PlanError::InvalidTransition);
  EXPECT_EQ(plan_->end_copy(t.value).error, PlanError::InvalidTransition);
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::HostReady);
  auto o = plan_->begin_copy(t.value);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(plan_->begin_copy(t.value).error, PlanError::InvalidTransition);  // COPYING -> COPYING
  ASSERT_TRUE(plan_->end_copy(t.value).ok());
  // FREE again: the retired ticket's tag no longer names anything.
  EXPECT_EQ(plan_->begin_copy(t.value).error, PlanError::StaleGeneration);
  EXPECT_EQ(plan_->end_copy(t.value).error, PlanError::StaleGeneration);
  EXPECT_EQ(plan_->complete_read(comp(t.value, 0, p0)).error, PlanError::StaleGeneration);
  // Unknown window, out-of-order piece, foreign slot, bad window index.
  EXPECT_EQ(plan_->complete_read(comp(uint64_t{5} | (uint64_t{1} << 32), 1, p0)).error, PlanError::UnknownTicket);
  EXPECT_EQ(plan_->begin_read(b.value, 0, p0, 1).error, PlanError::InvalidArgument);   // piece 0 again
  EXPECT_EQ(plan_->begin_read(b.value, 1, p0 + 1, 1).error, PlanError::InvalidArgument);  // slot not in bundle
  EXPECT_EQ(plan_->begin_read(b.value, 0, p0 + 1, 9).error, PlanError::InvalidArgument);
  EXPECT_EQ(plan_->window_phase(1), WindowPhase::Free);
  auto t2 = plan_->begin_read(b.value, 0, p0 + 1, 1);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(plan_->begin_read(b.value, 0, p0 + 1, 0).error, PlanError::InvalidArgument);  // every piece issued
  ASSERT_TRUE(plan_->complete_read(comp(t2.value, 1, p0 + 1)).ok());
  land(t2.value);
  ASSERT_EQ(plan_->publish(b.value), PlanError::None);
  auto c = plan_->acquire(1, 0);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(plan_->release(c.value), PlanError::None);
  EXPECT_GE(plan_->counters().errors[static_cast<size_t>(PlanError::InvalidTransition)], 6u);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, InvalidSlotTransitionsAreErrors) {
  make(1, 2, 2, 2);
  // VACANT: nothing to recycle, acquire or release.
  EXPECT_EQ(plan_->recycle(0), PlanError::InvalidTransition);
  EXPECT_EQ(plan_->recycle(7), PlanError::InvalidArgument);
  EXPECT_EQ(plan_->acquire(0, 0).error, PlanError::NotPublished);
  ConsumerTicket fake;
  fake.slot = 0;
  EXPECT_EQ(plan_->release(fake), PlanError::InvalidTransition);
  // Bundles: empty, too large, unknown object, more objects than vacant slots.
  uint32_t objs[3] = {0, 2, 3};
  uint64_t tags[3] = {10, 11, 12};
  EXPECT_EQ(plan_->request(objs, tags, 0).error, PlanError::InvalidArgument);
  EXPECT_EQ(plan_->request(objs, tags, 3).error, PlanError::InvalidArgument);
  uint32_t bad = 9;
  EXPECT_EQ(plan_->request(&bad, tags, 1).error, PlanError::InvalidArgument);
  auto b = plan_->request(objs + 1, tags + 1, 1);  // object 2 (one piece) in slot 0
  ASSERT_TRUE(b.ok());
  // LOADING: not publishable, not recyclable, not acquirable.
  EXPECT_EQ(plan_->publish(b.value), PlanError::BundleIncomplete);
  EXPECT_EQ(plan_->recycle(0), PlanError::InvalidTransition);
  EXPECT_EQ(plan_->acquire(11, 2).error, PlanError::NotPublished);
  EXPECT_EQ(plan_->slot_phase(0), SlotPhase::Loading);
  auto b2 = plan_->request(objs, tags, 1);
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(plan_->request(objs + 2, tags + 2, 1).error, PlanError::NoFreeSlot);
  const uint32_t p = m_.object(2).first_piece;
  auto t = plan_->begin_read(b.value, 0, p, 0);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(plan_->complete_read(comp(t.value, 0, p)).ok());
  land(t.value);
  ASSERT_EQ(plan_->publish(b.value), PlanError::None);
  EXPECT_EQ(plan_->publish(b.value), PlanError::InvalidArgument);  // the bundle is gone
  // DEVICE_READY: recycling before any consumer finished is refused.
  EXPECT_EQ(plan_->recycle(0), PlanError::NotConsumed);
  EXPECT_EQ(plan_->acquire(11, 3).error, PlanError::WrongObject);  // the version is object 2's
  auto c1 = plan_->acquire(11, 2);
  auto c2 = plan_->acquire(11, 2);
  ASSERT_TRUE(c1.ok() && c2.ok());
  EXPECT_EQ(plan_->acquire(11, 2).error, PlanError::InvalidTransition);  // only 2 consumers declared
  EXPECT_EQ(plan_->recycle(0), PlanError::ConsumersLive);
  ASSERT_EQ(plan_->release(c1.value), PlanError::None);
  EXPECT_EQ(plan_->recycle(0), PlanError::ConsumersLive);
  ASSERT_EQ(plan_->release(c2.value), PlanError::None);
  EXPECT_EQ(plan_->release(c2.value), PlanError::InvalidTransition);  // released twice
  EXPECT_EQ(plan_->slot_phase(0), SlotPhase::Recyclable);
  EXPECT_EQ(plan_->acquire(11, 2).error, PlanError::InvalidTransition);  // every declared consumer is done
  EXPECT_EQ(plan_->recycle(0), PlanError::None);
  EXPECT_EQ(plan_->recycle(0), PlanError::InvalidTransition);
  EXPECT_EQ(plan_->counters().recycle_refusals, 3u);
  // The other bundle never loaded: shutdown invalidates it.
  expect_balanced_after_shutdown();
  EXPECT_EQ(plan_->counters().bundles_invalidated, 1u);
  // After shutdown nothing is accepted.
  EXPECT_EQ(plan_->request(objs, tags, 1).error, PlanError::ShutDown);
  EXPECT_EQ(plan_->shutdown(), PlanError::ShutDown);
  EXPECT_EQ(plan_->acquire(11, 2).error, PlanError::ShutDown);
}

// ---- Table 7 negative controls ---------------------------------------------------------------

TEST_F(PlanTest, ShortReadIsRejectedAndNeverPublished) {
  make(2, 2, 1, 1);
  uint32_t obj = 0;
  uint64_t tag = 3;
  auto b = plan_->request(&obj, &tag, 1);
  const uint32_t p = m_.object(0).first_piece;
  auto t0 = plan_->begin_read(b.value, 0, p, 0);
  auto t1 = plan_->begin_read(b.value, 0, p + 1, 1);
  ASSERT_TRUE(t0.ok() && t1.ok());
  ASSERT_TRUE(plan_->complete_read(comp(t0.value, 0, p)).ok());
  land(t0.value);
  auto v = plan_->complete_read(comp(t1.value, 1, p + 1, RejectReason::ShortRead));
  EXPECT_EQ(v.error, PlanError::ShortRead);
  EXPECT_EQ(plan_->window_phase(1), WindowPhase::Free);
  EXPECT_EQ(plan_->slot_phase(0), SlotPhase::Vacant);  // abandoned, nothing in flight
  EXPECT_EQ(plan_->publish(b.value), PlanError::InvalidArgument);
  EXPECT_EQ(plan_->acquire(3, 0).error, PlanError::NotPublished);
  const PlanCounters c = plan_->counters();
  EXPECT_EQ(c.objects_published, 0u);
  EXPECT_EQ(c.bundles_failed, 1u);
  EXPECT_EQ(c.tickets_rejected, 1u);
  EXPECT_EQ(plan_->first_rejection().kind, PlanError::ShortRead);
  EXPECT_EQ(plan_->first_rejection().piece, p + 1);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, EioIsRejectedAndNeverPublished) {
  make(1, 1, 1, 1);
  uint32_t obj = 2;
  uint64_t tag = 0;
  auto b = plan_->request(&obj, &tag, 1);
  auto t = plan_->begin_read(b.value, 0, m_.object(2).first_piece, 0);
  auto v = plan_->complete_read(comp(t.value, 0, m_.object(2).first_piece, RejectReason::Failed));
  EXPECT_EQ(v.error, PlanError::ReadFailed);
  EXPECT_TRUE(is_fatal_rejection(v.error));
  EXPECT_EQ(plan_->begin_copy(t.value).error, PlanError::StaleGeneration);  // nothing left to copy
  EXPECT_EQ(plan_->acquire(0, 2).error, PlanError::NotPublished);
  EXPECT_EQ(plan_->counters().objects_published, 0u);
  // Extent overflow and a too-wide extent reported by the source are rejections too.
  auto b2 = plan_->request(&obj, &tag, 1);
  auto t2 = plan_->begin_read(b2.value, 0, m_.object(2).first_piece, 0);
  EXPECT_EQ(plan_->complete_read(comp(t2.value, 0, m_.object(2).first_piece, RejectReason::OutsideFile)).error,
            PlanError::ExtentOutsideFile);
  auto b3 = plan_->request(&obj, &tag, 1);
  auto t3 = plan_->begin_read(b3.value, 0, m_.object(2).first_piece, 0);
  EXPECT_EQ(plan_->complete_read(comp(t3.value, 0, m_.object(2).first_piece, RejectReason::TooLarge)).error,
            PlanError::ExtentTooLarge);
  EXPECT_EQ(plan_->counters().objects_published, 0u);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, OutOfOrderValidCompletionsPublishExactly) {
  make(4, 1, 1, 1);
  uint32_t obj = 3;  // four pieces
  uint64_t tag = 0;
  auto b = plan_->request(&obj, &tag, 1);
  const uint32_t p = m_.object(3).first_piece;
  uint64_t t[4];
  for (int i = 0; i < 4; ++i) {
    auto r = plan_->begin_read(b.value, 0, p + static_cast<uint32_t>(i), i);
    ASSERT_TRUE(r.ok());
    t[i] = r.value;
  }
  // Complete 3, 1, 0, 2 and copy in yet another order: legal order is not overconstrained.
  for (int i : {3, 1, 0, 2}) ASSERT_TRUE(plan_->complete_read(comp(t[i], i, p + static_cast<uint32_t>(i))).ok());
  EXPECT_EQ(plan_->publish(b.value), PlanError::BundleIncomplete);
  bool complete = false;
  for (int i : {0, 3, 2, 1}) complete = land(t[i]).bundle_complete;
  EXPECT_TRUE(complete);
  ASSERT_EQ(plan_->publish(b.value), PlanError::None);
  EXPECT_TRUE(slot_holds(0, 3));
  auto c = plan_->acquire(0, 3);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(plan_->release(c.value), PlanError::None);
  EXPECT_EQ(plan_->counters().tickets_rejected, 0u);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, StaleGenerationIsRejected) {
  make(1, 1, 1, 1);
  // A late duplicate of an earlier completion on the same window names a retired ticket.
  const BundleHandle b = load(2, 0);
  ASSERT_EQ(plan_->publish(b), PlanError::None);
  auto c = plan_->acquire(0, 2);
  ASSERT_TRUE(c.ok());
  const ConsumerTicket old = c.value;
  ASSERT_EQ(plan_->release(old), PlanError::None);
  ASSERT_EQ(plan_->recycle(0), PlanError::None);
  uint32_t obj = 2;
  uint64_t tag = 1;
  auto b2 = plan_->request(&obj, &tag, 1);
  const uint32_t p = m_.object(2).first_piece;
  auto t = plan_->begin_read(b2.value, 0, p, 0);
  ASSERT_TRUE(t.ok());
  const uint64_t late_tag = t.value - (uint64_t{1} << 32);  // serial - 1: the previous read on window 0
  auto v = plan_->complete_read(comp(late_tag, 0, p));
  EXPECT_EQ(v.error, PlanError::StaleGeneration);
  EXPECT_EQ(plan_->window_phase(0), WindowPhase::Reading);  // the live read is untouched
  EXPECT_EQ(plan_->counters().completions_refused, 1u);
  // The live completion still lands.
  ASSERT_TRUE(plan_->complete_read(comp(t.value, 0, p)).ok());
  land(t.value);
  ASSERT_EQ(plan_->publish(b2.value), PlanError::None);
  // A consumer ticket of the slot's previous generation cannot release the new version.
  EXPECT_EQ(plan_->release(old), PlanError::StaleGeneration);
  auto c2 = plan_->acquire(1, 2);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2.value.generation, old.generation + 1);
  ASSERT_EQ(plan_->release(c2.value), PlanError::None);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, WrongObjectIsRejectedBeforeVisibility) {
  make(1, 2, 1, 1);
  uint32_t obj = 2;
  uint64_t tag = 0;
  auto b = plan_->request(&obj, &tag, 1);
  const uint32_t p = m_.object(2).first_piece;
  auto t = plan_->begin_read(b.value, 0, p, 0);
  // The source delivered object A's first piece into the window meant for C.
  Completion c = comp(t.value, 0, m_.object(0).first_piece);
  auto v = plan_->complete_read(c);
  EXPECT_EQ(v.error, PlanError::WrongObject);
  EXPECT_EQ(plan_->first_rejection().claimed_object, 0u);
  EXPECT_EQ(plan_->first_rejection().object, 2u);
  EXPECT_EQ(plan_->acquire(0, 2).error, PlanError::NotPublished);
  // A garbled extent that is nobody's piece, and a completion in the wrong window.
  auto b2 = plan_->request(&obj, &tag, 1);
  auto t2 = plan_->begin_read(b2.value, plan_->bundle_slot(b2.value, 0).value, p, 0);
  Completion g = comp(t2.value, 0, p);
  g.extent.length -= 1;
  EXPECT_EQ(plan_->complete_read(g).error, PlanError::WrongExtent);
  auto b3 = plan_->request(&obj, &tag, 1);
  auto t3 = plan_->begin_read(b3.value, plan_->bundle_slot(b3.value, 0).value, p, 0);
  Completion w = comp(t3.value, 0, p);
  w.window = 5;
  EXPECT_EQ(plan_->complete_read(w).error, PlanError::WindowMismatch);
  EXPECT_EQ(plan_->counters().objects_published, 0u);
  EXPECT_EQ(plan_->counters().tickets_rejected, 3u);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, HeldConsumerDelaysReuse) {
  make(1, 1, 2, 1);
  const BundleHandle b = load(2, 0);
  ASSERT_EQ(plan_->publish(b), PlanError::None);
  const uint64_t gen = plan_->slot_generation(0);
  auto a = plan_->acquire(0, 2);
  ASSERT_TRUE(a.ok());
  uint32_t obj = 0;
  uint64_t tag = 1;
  // The only slot is held: no new version can be requested, and recycling is refused.
  EXPECT_EQ(plan_->request(&obj, &tag, 1).error, PlanError::NoFreeSlot);
  EXPECT_EQ(plan_->recycle(0), PlanError::ConsumersLive);
  EXPECT_EQ(plan_->recycle_ready(), 0u);
  auto c = plan_->acquire(0, 2);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(plan_->release(c.value), PlanError::None);  // the other consumer finishes first
  EXPECT_EQ(plan_->recycle(0), PlanError::ConsumersLive);
  EXPECT_EQ(plan_->slot_generation(0), gen);
  EXPECT_TRUE(slot_holds(0, 2));  // the held bytes were never overwritten
  ASSERT_EQ(plan_->release(a.value), PlanError::None);
  EXPECT_EQ(plan_->recycle_ready(), 1u);
  EXPECT_TRUE(plan_->request(&obj, &tag, 1).ok());
  EXPECT_EQ(plan_->counters().recycle_refusals, 2u);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, ResetInvalidatesOutstandingReads) {
  make(3, 3, 1, 1);
  // One published version survives the reset; two loading ones are invalidated.
  const BundleHandle pub = load(2, 100);
  ASSERT_EQ(plan_->publish(pub), PlanError::None);
  uint32_t obj = 0;
  uint64_t tag = 101;
  auto b = plan_->request(&obj, &tag, 1);
  const int32_t slot = plan_->bundle_slot(b.value, 0).value;
  const uint32_t p = m_.object(0).first_piece;
  auto t0 = plan_->begin_read(b.value, slot, p, 0);
  auto t1 = plan_->begin_read(b.value, slot, p + 1, 1);
  ASSERT_TRUE(t0.ok() && t1.ok());
  ASSERT_TRUE(plan_->complete_read(comp(t0.value, 0, p)).ok());  // HOST_READY at the reset
  const uint64_t e0 = plan_->epoch();
  auto r = plan_->reset();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value, 2u);  // two source operations outstanding
  EXPECT_EQ(plan_->epoch(), e0 + 1);
  // Neither can reach the slot: the accepted one cannot be copied, the other completes stale.
  EXPECT_EQ(plan_->begin_copy(t0.value).error, PlanError::StaleEpoch);
  EXPECT_EQ(plan_->complete_read(comp(t1.value, 1, p + 1)).error, PlanError::StaleEpoch);
  EXPECT_FALSE(is_fatal_rejection(PlanError::StaleEpoch));
  EXPECT_EQ(plan_->slot_phase(slot), SlotPhase::Vacant);
  EXPECT_EQ(plan_->publish(b.value), PlanError::InvalidArgument);
  EXPECT_EQ(plan_->acquire(101, 0).error, PlanError::NotPublished);
  const PlanCounters c = plan_->counters();
  EXPECT_EQ(c.tickets_invalidated, 2u);
  EXPECT_EQ(c.bundles_invalidated, 1u);
  EXPECT_EQ(c.bundles_failed, 0u);
  // The published version is still valid, and the request can be served again.
  auto k = plan_->acquire(100, 2);
  ASSERT_TRUE(k.ok());
  ASSERT_EQ(plan_->release(k.value), PlanError::None);
  const BundleHandle again = load(0, 101);
  ASSERT_EQ(plan_->publish(again), PlanError::None);
  auto k2 = plan_->acquire(101, 0);
  ASSERT_TRUE(k2.ok());
  EXPECT_TRUE(slot_holds(k2.value.slot, 0));
  EXPECT_EQ(k2.value.epoch, e0 + 1);
  ASSERT_EQ(plan_->release(k2.value), PlanError::None);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, ShutdownChecksSourceWorkAndLiveConsumers) {
  make(1, 2, 1, 1);
  const BundleHandle b = load(2, 0);
  ASSERT_EQ(plan_->publish(b), PlanError::None);
  auto c = plan_->acquire(0, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(plan_->shutdown(), PlanError::ConsumersLive);
  EXPECT_FALSE(plan_->balance().shut_down);
  EXPECT_EQ(plan_->slot_phase(0), SlotPhase::InUse);  // the consumer's version is untouched
  ASSERT_EQ(plan_->release(c.value), PlanError::None);
  // A submitted read also holds shutdown off.
  uint32_t obj = 0;
  uint64_t tag = 1;
  auto b2 = plan_->request(&obj, &tag, 1);
  auto t = plan_->begin_read(b2.value, 1, m_.object(0).first_piece, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(plan_->shutdown(), PlanError::OutstandingReads);
  EXPECT_EQ(plan_->counters().shutdown_refusals, 2u);
  EXPECT_EQ(plan_->complete_read(comp(t.value, 0, m_.object(0).first_piece, RejectReason::Failed)).error,
            PlanError::ReadFailed);
  expect_balanced_after_shutdown();
  EXPECT_EQ(plan_->counters().objects_published, 1u);
}

TEST_F(PlanTest, FailedExtentInsideBundlePublishesNothing) {
  make(3, 3, 1, 2);
  uint32_t objs[2] = {2, 1};  // C (one piece) + B (three pieces: two extents)
  uint64_t tags[2] = {40, 41};
  auto b = plan_->request(objs, tags, 2);
  ASSERT_TRUE(b.ok());
  const int32_t s0 = plan_->bundle_slot(b.value, 0).value, s1 = plan_->bundle_slot(b.value, 1).value;
  const uint32_t pc = m_.object(2).first_piece, pb = m_.object(1).first_piece;
  // C lands completely and B's first piece lands: the bundle is still invisible.
  auto tc = plan_->begin_read(b.value, s0, pc, 0);
  ASSERT_TRUE(plan_->complete_read(comp(tc.value, 0, pc)).ok());
  land(tc.value);
  auto t1 = plan_->begin_read(b.value, s1, pb, 0);
  ASSERT_TRUE(plan_->complete_read(comp(t1.value, 0, pb)).ok());
  land(t1.value);
  EXPECT_EQ(plan_->publish(b.value), PlanError::BundleIncomplete);
  EXPECT_EQ(plan_->acquire(40, 2).error, PlanError::NotPublished);
  // B's second piece is in flight when its third (the second extent) fails.
  auto t2 = plan_->begin_read(b.value, s1, pb + 1, 1);
  auto t3 = plan_->begin_read(b.value, s1, pb + 2, 2);
  ASSERT_TRUE(t2.ok() && t3.ok());
  EXPECT_EQ(plan_->complete_read(comp(t3.value, 2, pb + 2, RejectReason::Failed)).error, PlanError::ReadFailed);
  EXPECT_EQ(plan_->slot_phase(s0), SlotPhase::Vacant);   // C is vacated although it landed
  EXPECT_EQ(plan_->slot_phase(s1), SlotPhase::Loading);  // B waits for its in-flight read
  // The in-flight sibling completes valid, and is dropped.
  EXPECT_EQ(plan_->complete_read(comp(t2.value, 1, pb + 1)).error, PlanError::BundleFailed);
  EXPECT_EQ(plan_->slot_phase(s1), SlotPhase::Vacant);
  EXPECT_EQ(plan_->publish(b.value), PlanError::InvalidArgument);
  EXPECT_EQ(plan_->acquire(40, 2).error, PlanError::NotPublished);
  EXPECT_EQ(plan_->acquire(41, 1).error, PlanError::NotPublished);
  const PlanCounters c = plan_->counters();
  EXPECT_EQ(c.objects_published, 0u);
  EXPECT_EQ(c.bundles_published, 0u);
  EXPECT_EQ(c.bundles_failed, 1u);
  EXPECT_EQ(c.tickets_copied, 2u);
  EXPECT_EQ(c.tickets_rejected, 2u);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, BundlePublishesAllOrNothingInOneTransition) {
  make(1, 2, 1, 2);
  uint32_t objs[2] = {2, 0};
  uint64_t tags[2] = {1, 2};
  auto b = plan_->request(objs, tags, 2);
  ASSERT_TRUE(b.ok());
  uint32_t pieces[3] = {m_.object(2).first_piece, m_.object(0).first_piece, m_.object(0).first_piece + 1};
  int32_t slots[3] = {plan_->bundle_slot(b.value, 0).value, plan_->bundle_slot(b.value, 1).value,
                      plan_->bundle_slot(b.value, 1).value};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(plan_->publish(b.value), PlanError::BundleIncomplete);
    auto t = plan_->begin_read(b.value, slots[i], pieces[i], 0);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(plan_->complete_read(comp(t.value, 0, pieces[i])).ok());
    EXPECT_EQ(land(t.value).bundle_complete, i == 2);
    EXPECT_EQ(plan_->acquire(1, 2).error, PlanError::NotPublished);
  }
  const uint64_t v0 = plan_->counters().transitions;
  ASSERT_EQ(plan_->publish(b.value), PlanError::None);
  EXPECT_EQ(plan_->counters().transitions, v0 + 1);
  EXPECT_EQ(plan_->slot_phase(slots[0]), SlotPhase::DeviceReady);
  EXPECT_EQ(plan_->slot_phase(slots[1]), SlotPhase::DeviceReady);
  EXPECT_TRUE(slot_holds(slots[0], 2));
  EXPECT_TRUE(slot_holds(slots[1], 0));
  EXPECT_EQ(plan_->counters().bundles_published, 1u);
  EXPECT_EQ(plan_->counters().objects_published, 2u);
  for (uint64_t tag : {1, 2}) {
    auto c = plan_->acquire(tag, tag == 1 ? 2u : 0u);
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(plan_->release(c.value), PlanError::None);
  }
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, SizeDisagreementAtPublicationIsRejected) {
  make(1, 1, 1, 1);
  const BundleHandle b = load(2, 0);
  PlanTestAccess::set_landed(*plan_, 0, 776);  // one byte short of the object's 777
  EXPECT_EQ(plan_->publish(b), PlanError::SizeMismatch);
  EXPECT_EQ(plan_->first_rejection().kind, PlanError::SizeMismatch);
  EXPECT_EQ(plan_->acquire(0, 2).error, PlanError::NotPublished);
  EXPECT_EQ(plan_->counters().objects_published, 0u);
  EXPECT_EQ(plan_->slot_phase(0), SlotPhase::Vacant);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, InterruptedReadIsAbandonedAfterTheDrain) {
  make(2, 1, 1, 1);
  uint32_t obj = 0;
  uint64_t tag = 0;
  auto b = plan_->request(&obj, &tag, 1);
  auto t = plan_->begin_read(b.value, 0, m_.object(0).first_piece, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(plan_->shutdown(), PlanError::OutstandingReads);
  EXPECT_EQ(plan_->abandon_tickets(), 1u);
  EXPECT_EQ(plan_->counters().tickets_abandoned, 1u);
  EXPECT_EQ(plan_->counters().bundles_failed, 1u);
  EXPECT_EQ(plan_->complete_read(comp(t.value, 0, m_.object(0).first_piece)).error, PlanError::StaleGeneration);
  expect_balanced_after_shutdown();
}

// ---- the invariant checker is not vacuous -----------------------------------------------------

TEST_F(PlanTest, EagerReconcileChecksEveryTransition) {
  make(1, 1, 1, 1);
  const BundleHandle b = load(2, 0);
  ASSERT_EQ(plan_->publish(b), PlanError::None);
  const PlanCounters c = plan_->counters();
  EXPECT_EQ(c.reconcile_checks, c.transitions);
  EXPECT_EQ(c.reconcile_violations, 0u);
  auto k = plan_->acquire(0, 2);
  ASSERT_EQ(plan_->release(k.value), PlanError::None);
  expect_balanced_after_shutdown();
}

TEST_F(PlanTest, ReconcileDetectsACorruptedState) {
  make(1, 2, 1, 1, /*eager=*/false);
  EXPECT_TRUE(plan_->reconcile());
  // Negative control 1: a VACANT slot with a live consumer.
  PlanTestAccess::set_consumers(*plan_, 1, 1);
  EXPECT_FALSE(plan_->reconcile());
  EXPECT_NE(plan_->first_violation().find("slot 1"), std::string::npos) << plan_->first_violation();
  PlanTestAccess::set_consumers(*plan_, 1, 0);
  // Negative control 2: a window READING without a ticket.
  PlanTestAccess::set_window(*plan_, 0, WindowPhase::Reading);
  EXPECT_FALSE(plan_->reconcile());
  PlanTestAccess::set_window(*plan_, 0, WindowPhase::Free);
  EXPECT_TRUE(plan_->reconcile());
  EXPECT_EQ(plan_->counters().reconcile_violations, 2u);
  plan_.reset();  // TearDown would count the deliberate violations
}

// ---- concurrency: one producer, several consumers (run under TSan) ------------------------------

TEST_F(PlanTest, ProducerAndConsumersBalanceUnderConcurrency) {
  make(2, 3, 3, 1);
  constexpr uint64_t kSteps = 200;
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> consumers;
  for (int me = 0; me < 3; ++me) {
    consumers.emplace_back([&] {
      for (uint64_t s = 0; s < kSteps; ++s) {
        const uint32_t obj = static_cast<uint32_t>(s % 4);
        PlanResult<ConsumerTicket> r;
        for (;;) {
          const uint64_t v = plan_->version();
          r = plan_->acquire(s, obj);
          if (r.ok()) break;
          if (r.error != PlanError::NotPublished) {
            bad.fetch_add(1);
            return;
          }
          plan_->wait_change(v, std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
        }
        if (!slot_holds(r.value.slot, obj)) bad.fetch_add(1);
        if (plan_->release(r.value) != PlanError::None) bad.fetch_add(1);
      }
    });
  }
  for (uint64_t s = 0; s < kSteps; ++s) {
    const uint32_t obj = static_cast<uint32_t>(s % 4);
    for (;;) {
      const uint64_t v = plan_->version();
      plan_->recycle_ready();
      auto b = plan_->request(&obj, &s, 1);
      if (b.ok()) {
        const int32_t slot = plan_->bundle_slot(b.value, 0).value;
        const PlanObject& o = m_.object(obj);
        bool complete = false;
        for (uint32_t i = 0; i < o.pieces; ++i) {
          auto t = plan_->begin_read(b.value, slot, o.first_piece + i, 0);
          ASSERT_TRUE(t.ok());
          ASSERT_TRUE(plan_->complete_read(comp(t.value, 0, o.first_piece + i)).ok());
          complete = land(t.value).bundle_complete;
        }
        ASSERT_TRUE(complete);
        ASSERT_EQ(plan_->publish(b.value), PlanError::None);
        break;
      }
      ASSERT_EQ(b.error, PlanError::NoFreeSlot);
      plan_->wait_change(v, std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
    }
  }
  for (auto& t : consumers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(plan_->counters().consumer_releases, 3 * kSteps);
  plan_->recycle_ready();
  expect_balanced_after_shutdown();
}

// ---- checksums and the allocation counter --------------------------------------------------------

TEST(Checksum, DetectsFlipsSwapsAndPlacement) {
  std::vector<std::byte> a(3 * kChecksumBlock + 13);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::byte>(splitmix64(i) & 0xff);
  const uint64_t h = hash64(a.data(), a.size(), 5);
  EXPECT_EQ(h, hash64(a.data(), a.size(), 5));
  EXPECT_NE(h, hash64(a.data(), a.size(), 6));  // placement: the seed is the file offset
  for (size_t pos : {size_t{0}, size_t{31}, size_t{32}, a.size() - 1}) {
    auto b = a;
    b[pos] ^= std::byte{1};
    EXPECT_NE(h, hash64(b.data(), b.size(), 5)) << pos;
  }
  // Per-block sums catch swapped blocks because each block's seed is its offset.
  auto sum = [&](const std::vector<std::byte>& v) {
    uint64_t s = 0;
    for (uint64_t off = 0; off < v.size(); off += kChecksumBlock)
      s += hash64(v.data() + off, std::min<uint64_t>(kChecksumBlock, v.size() - off), 1000 + off);
    return s;
  };
  auto sw = a;
  std::swap_ranges(sw.begin(), sw.begin() + kChecksumBlock, sw.begin() + kChecksumBlock);
  EXPECT_NE(sum(a), sum(sw));
  EXPECT_NE(digest_fold(0, 1), digest_fold(0, 2));
  EXPECT_NE(digest_fold(digest_fold(0, 1), 2), digest_fold(digest_fold(0, 2), 1));
}

TEST(AllocCounter, CountsOnlyInsideTheReadPath) {
  ASSERT_TRUE(alloc_hook_installed());
  const AllocCounts a0 = alloc_counts();
  int* volatile p = new int(1);  // outside any scope: not counted (volatile: no elision)
  delete p;
  EXPECT_EQ(alloc_counts().read_path, a0.read_path);
  {
    ReadPathScope s;
    p = new int(2);  // the positive control: the counter sees an allocation
    delete p;
    {
      RejectionPathScope r;
      p = new int(3);
      delete p;
    }
  }
  const AllocCounts a1 = alloc_counts();
  EXPECT_EQ(a1.read_path - a0.read_path, 1u);
  EXPECT_EQ(a1.rejection_path - a0.rejection_path, 1u);
}

TEST_F(PlanTest, PlanTransitionsDoNotAllocate) {
  make(2, 2, 1, 1);
  load(0, 0);  // warm-up
  ASSERT_EQ(plan_->shutdown(), PlanError::None);
  make(2, 2, 1, 1);
  const AllocCounts a0 = alloc_counts();
  {
    ReadPathScope s;
    for (uint64_t i = 0; i < 20; ++i) {
      const BundleHandle b = load(static_cast<uint32_t>(i % 4), i);
      ASSERT_EQ(plan_->publish(b), PlanError::None);
      auto c = plan_->acquire(i, static_cast<uint32_t>(i % 4));
      ASSERT_EQ(plan_->release(c.value), PlanError::None);
      ASSERT_EQ(plan_->recycle_ready(), 1u);
    }
  }
  EXPECT_EQ(alloc_counts().read_path - a0.read_path, 0u);
  expect_balanced_after_shutdown();
}

// ---- open consumers (the pager: slot = chunk, consumers enter and leave any time) -----------

namespace {

// Reads every piece of `object` into the given slot, then publishes (one-object bundle).
PlanError load_into(Plan& plan, const PlanManifest& m, int32_t slot, uint32_t object,
                    const std::function<Completion(uint64_t, int32_t, uint32_t)>& comp,
                    const std::function<EndCopyVerdict(uint64_t)>& land) {
  const uint64_t tag = object;
  auto b = plan.request_slots(&slot, &object, &tag, 1);
  if (!b.ok()) return b.error;
  const PlanObject& o = m.object(object);
  for (uint32_t i = 0; i < o.pieces; ++i) {
    auto t = plan.begin_read(b.value, slot, o.first_piece + i, 0);
    if (!t.ok()) return t.error;
    auto v = plan.complete_read(comp(t.value, 0, o.first_piece + i));
    if (!v.ok()) return v.error;
    land(t.value);
  }
  return plan.publish(b.value);
}

}  // namespace

TEST_F(PlanTest, OpenConsumers_HoldInAnyPhaseAndReuseTheCachedVersion) {
  make(1, 4, 1, 1, true, true);
  auto comp_fn = [this](uint64_t t, int32_t w, uint32_t p) { return comp(t, w, p); };
  auto land_fn = [this](uint64_t t) { return land(t); };
  // A consumer holds slot 2 before its version exists (a step enters its chunks first).
  EXPECT_EQ(plan_->hold(2), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(2), SlotPhase::Vacant);
  EXPECT_EQ(plan_->recycle(2), PlanError::ConsumersLive);  // nothing to recycle, and held
  ASSERT_EQ(load_into(*plan_, m_, 2, 1, comp_fn, land_fn), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(2), SlotPhase::InUse);       // published while held
  EXPECT_TRUE(slot_holds(2, 1));
  EXPECT_EQ(plan_->recycle(2), PlanError::ConsumersLive);
  EXPECT_EQ(plan_->unhold(2), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(2), SlotPhase::Recyclable);
  const uint64_t gen = plan_->slot_generation(2);
  EXPECT_EQ(plan_->hold(2), PlanError::None);              // the cached version reused
  EXPECT_EQ(plan_->slot_phase(2), SlotPhase::InUse);
  EXPECT_EQ(plan_->slot_generation(2), gen);
  EXPECT_EQ(plan_->hold(2), PlanError::None);              // a second consumer
  EXPECT_EQ(plan_->unhold(2), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(2), SlotPhase::InUse);
  EXPECT_EQ(plan_->unhold(2), PlanError::None);
  EXPECT_EQ(plan_->unhold(2), PlanError::InvalidTransition);  // no consumer left
  EXPECT_EQ(plan_->recycle(2), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(2), SlotPhase::Vacant);
  // A version published ahead and never held may be recycled (evicted unused).
  ASSERT_EQ(load_into(*plan_, m_, 0, 2, comp_fn, land_fn), PlanError::None);
  EXPECT_EQ(plan_->slot_phase(0), SlotPhase::DeviceReady);
  EXPECT_EQ(plan_->recycle(0), PlanError::None);
  // A slot is requested by index, and only when VACANT; the declared-consumer calls are refused.
  ASSERT_EQ(load_into(*plan_, m_, 3, 0, comp_fn, land_fn), PlanError::None);
  const int32_t three = 3;
  const uint32_t obj = 0;
  const uint64_t tag = 0;
  EXPECT_EQ(plan_->request_slots(&three, &obj, &tag, 1).error, PlanError::InvalidTransition);
  EXPECT_EQ(plan_->acquire(0, 0).error, PlanError::InvalidTransition);
  const PlanCounters c = plan_->counters();
  EXPECT_EQ(c.recycle_refusals, 2u);
  EXPECT_EQ(c.recycled_unconsumed, 1u);
  EXPECT_EQ(c.recycles, 2u);
  EXPECT_EQ(c.consumer_acquires, c.consumer_releases);
  EXPECT_GT(c.reconcile_checks, 0u);
  EXPECT_EQ(plan_->shutdown(), PlanError::None);
  EXPECT_EQ(plan_->counters().versions_discarded, 1u);  // slot 3, published and never held
  EXPECT_TRUE(plan_->balance().balanced());
}

TEST_F(PlanTest, OpenConsumers_ShutdownRefusedWhileHeld) {
  make(1, 2, 1, 1, true, true);
  EXPECT_EQ(plan_->hold(1), PlanError::None);
  EXPECT_EQ(plan_->shutdown(), PlanError::ConsumersLive);
  EXPECT_EQ(plan_->unhold(1), PlanError::None);
  EXPECT_EQ(plan_->shutdown(), PlanError::None);
}
