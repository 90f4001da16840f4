#include "plan/fill.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "core/alloc_count.hpp"
#include "core/checksum.hpp"
#include "core/clock.hpp"

namespace resid {

FillPath::FillPath(Plan& plan, Source& source, FillOwner& owner, FillOptions opts)
    : plan_(plan), src_(source), owner_(owner), opts_(opts), fills_(opts.max_fills), win_(source.window_count()) {
  for (Fill& f : fills_) {
    f.objects.reserve(opts_.max_objects);
    f.wins.reserve(source.window_count());
  }
  order_.reserve(opts_.max_fills);
}

int FillPath::track(BundleHandle bundle, const uint32_t* objects, uint32_t n) {
  if (n > opts_.max_objects) throw std::logic_error("fill path: a bundle of more objects than max_objects");
  auto it = std::find_if(fills_.begin(), fills_.end(), [](const Fill& f) { return !f.live; });
  if (it == fills_.end()) return -1;
  Fill& f = *it;
  const PlanManifest& m = plan_.manifest();
  f.live = true;
  f.failed = f.rejected = false;
  f.serial = ++serial_;
  f.bundle = bundle;
  f.n = n;
  f.objects.assign(objects, objects + n);
  f.wins.clear();
  f.next_obj = f.next_piece = 0;
  f.reads = f.issued = f.completed = f.accepted = f.copied = f.held = 0;
  for (uint32_t i = 0; i < n; ++i) f.reads += m.object(objects[i]).pieces;
  // Held until the whole bundle landed: every read needs its own window at once.
  if (!opts_.copy_on_accept && f.reads > win_.size())
    throw std::logic_error("fill path: a bundle held until landed has more reads than windows");
  const uint32_t fi = static_cast<uint32_t>(it - fills_.begin());
  order_.push_back(fi);
  return static_cast<int>(fi);
}

uint32_t FillPath::issue(uint32_t max) {
  uint32_t n = 0;
  for (size_t k = 0; k < order_.size() && n < max && !closed_; ++k) {
    const uint32_t fi = order_[k];
    Fill& f = fills_[fi];
    while (!f.failed && f.issued < f.reads && n < max && !closed_) {
      if (!issue_one(f, fi)) return n;
      ++n;
    }
    // Reads of one bundle go out together, oldest bundle first: a later bundle waits.
    if (f.issued < f.reads && !f.failed) return n;
  }
  return n;
}

bool FillPath::issue_one(Fill& f, uint32_t fi) {
  const int w = src_.free_window();
  if (w < 0 || static_cast<size_t>(w) >= win_.size() || win_[static_cast<size_t>(w)].busy) return false;
  const PlanManifest& m = plan_.manifest();
  auto slot = plan_.bundle_slot(f.bundle, f.next_obj);
  const uint32_t piece = m.object(f.objects[f.next_obj]).first_piece + f.next_piece;
  auto t = slot.ok() ? plan_.begin_read(f.bundle, slot.value, piece, w) : PlanResult<uint64_t>{slot.error, 0};
  if (!t.ok()) {
    f.failed = true;
    owner_.on_internal(fi, "the Plan refused a read ticket", t.error);
    maybe_dropped(f, fi);
    return false;
  }
  if (f.issued == 0) src_.begin_bundle(f.reads);
  WindowRead& r = win_[static_cast<size_t>(w)];
  r = WindowRead{true, false, fi, f.serial, piece, t.value, now_ns(), {}};
  busy_slot_.store(slot.value);
  busy_since_ns_.store(r.submit_ns);
  const bool ok = src_.submit(m.piece(piece).extent_range(), t.value);
  busy_slot_.store(-1);
  if (!ok) {
    r.busy = false;
    f.failed = true;
    owner_.on_internal(fi, "the source refused a read into its free window", PlanError::None);
    maybe_dropped(f, fi);
    return false;
  }
  if (!opts_.copy_on_accept) f.wins.push_back(w);
  ++f.issued;
  ++f.held;
  ++inflight_;
  ++c_.reads_issued;
  if (++f.next_piece == m.object(f.objects[f.next_obj]).pieces) {
    f.next_piece = 0;
    ++f.next_obj;
  }
  return true;
}

uint32_t FillPath::reap(bool wait, uint32_t max) {
  uint32_t n = 0;
  while (n < max && inflight_ > 0) {
    auto c = src_.reap(wait && n == 0);
    if (!c) break;
    handle(std::move(*c));
    ++n;
  }
  return n;
}

FillPath::Fill* FillPath::fill_for(const WindowRead& r) {
  Fill& f = fills_[r.fill];
  return f.live && f.serial == r.serial ? &f : nullptr;
}

void FillPath::handle(Completion&& c) {
  --inflight_;
  ++c_.completions;
  const size_t w = static_cast<size_t>(c.window);
  if (c.window < 0 || w >= win_.size() || !win_[w].busy || win_[w].landed) {
    (void)plan_.complete_read(c);  // refused (no live ticket there): counted by the Plan
    if (c.window >= 0 && w < win_.size()) src_.release(c);
    ++c_.unmatched;
    owner_.on_internal(UINT32_MAX, "a completion for a window which holds no read", PlanError::None);
    return;
  }
  WindowRead& r = win_[w];
  if (opts_.stats_mutex) {
    std::lock_guard lk(*opts_.stats_mutex);
    lat_.record(now_ns() - r.submit_ns);
  } else {
    lat_.record(now_ns() - r.submit_ns);
  }
  Fill* f = fill_for(r);
  if (opts_.piece_digests) check_content(r, c);
  auto v = plan_.complete_read(c);
  if (v.ok() && f) return on_accepted(*f, r.fill, r, std::move(c));
  on_refused(f, r.fill, v.ok() ? PlanError::StaleEpoch : v.error, std::move(c));
}

// A read of exactly its piece's extent whose bytes hash to another digest becomes a
// rejection (the Plan then refuses it like any other: its bundle fails closed).
void FillPath::check_content(const WindowRead& r, Completion& c) {
  const PlanPiece& p = plan_.manifest().piece(r.piece);
  if (!c.ok() || c.extent.offset != p.offset || c.extent.length != p.length) return;
  const uint64_t t0 = now_ns();
  const uint64_t got = hash64(c.data, c.extent.length, 0), want = (*opts_.piece_digests)[r.piece];
  c_.content_check_ns += now_ns() - t0;
  ++c_.content_checks;
  if (got == want) return;
  ++c_.content_mismatches;
  RejectionPathScope scope;  // the message is the rejection's, not the read path's
  char buf[160];
  std::snprintf(buf, sizeof buf, "content mismatch in [%llu, +%llu): xxh64 %016llx, the content digests say %016llx",
                static_cast<unsigned long long>(c.extent.offset), static_cast<unsigned long long>(c.extent.length),
                static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
  c.reason = RejectReason::ContentMismatch;
  c.error = buf;
  c.data = nullptr;
}

void FillPath::on_accepted(Fill& f, uint32_t fi, WindowRead& r, Completion&& c) {
  ++c_.accepted;
  ++f.completed;
  ++f.accepted;
  r.landed = true;  // HOST_READY: held in its window until copied or released
  r.comp = std::move(c);
  if (closed_) return;  // after a fatal rejection nothing is copied (released at close)
  if (f.failed) {
    retire_landed(f, fi);
    maybe_dropped(f, fi);
    return;
  }
  if (opts_.copy_on_accept) {
    if (!copy_one(fi, r)) {
      f.failed = true;
      maybe_dropped(f, fi);
      return;
    }
    if (f.copied == f.reads) owner_.on_landed(fi);
    return;
  }
  if (f.accepted == f.reads) owner_.on_landed(fi);
}

void FillPath::on_refused(Fill* f, uint32_t fi, PlanError e, Completion&& c) {
  WindowRead& r = win_[static_cast<size_t>(c.window)];
  if (e == PlanError::StaleEpoch) {
    ++c_.invalidated;
  } else if (e == PlanError::BundleFailed) {
    ++c_.dropped;
  } else {
    ++c_.rejected;
    if (f && !f->rejected) {
      f->rejected = true;
      f->failed = true;
      owner_.on_rejected(fi, e, c);
    }
  }
  release(r, f, c);
  if (!f) return;
  ++f->completed;
  if (e != PlanError::StaleEpoch) f->failed = true;
  if (f->failed) {
    retire_landed(*f, fi);  // siblings that landed are retired without a copy
    maybe_dropped(*f, fi);
  }
}

bool FillPath::copy_one(uint32_t fi, WindowRead& r) {
  Fill& f = fills_[fi];
  auto o = plan_.begin_copy(r.tag);  // HOST_READY -> COPYING
  bool ok = o.ok() && !f.failed;
  if (ok) ok = owner_.copy(fi, o.value, r.comp, r.submit_ns);
  release(r, &f, r.comp);
  if (o.ok()) {
    auto e = plan_.end_copy(r.tag);  // COPYING -> FREE, the ticket retired
    if (!e.ok()) {
      owner_.on_internal(fi, "the Plan refused the end of a copy", e.error);
      ok = false;
    }
  } else if (o.error != PlanError::BundleFailed) {
    owner_.on_internal(fi, "the Plan refused a copy", o.error);
  }
  if (ok) ++f.copied;
  return ok;
}

bool FillPath::land(uint32_t fi) {
  Fill& f = fills_[fi];
  if (closed_ || !f.live) return false;
  for (int32_t w : f.wins) {
    WindowRead& r = win_[static_cast<size_t>(w)];
    if (!r.busy || !r.landed || r.fill != fi || r.serial != f.serial) continue;
    if (!copy_one(fi, r)) f.failed = true;  // the rest is not copied; the owner drops the fill
  }
  return !f.failed && f.copied == f.reads;
}

PlanError FillPath::publish(uint32_t fi) {
  Fill& f = fills_[fi];
  const PlanError e = plan_.publish(f.bundle);
  if (e == PlanError::None) forget(fi);
  return e;
}

void FillPath::release(WindowRead& r, Fill* f, const Completion& c) {
  src_.release(c);
  r.busy = r.landed = false;
  if (f && f->held > 0) --f->held;
}

void FillPath::retire_landed(Fill& f, uint32_t fi) {
  for (WindowRead& r : win_) {
    if (!r.busy || !r.landed || r.fill != fi || r.serial != f.serial) continue;
    auto o = plan_.begin_copy(r.tag);  // BundleFailed: retired, window FREE, nothing copied
    if (o.ok()) (void)plan_.end_copy(r.tag);
    release(r, &f, r.comp);
  }
}

void FillPath::maybe_dropped(Fill& f, uint32_t fi) {
  if (!f.live || !f.failed || f.completed < f.issued || f.held > 0) return;
  forget(fi);
  owner_.on_dropped(fi);
}

void FillPath::forget(uint32_t fi) {
  fills_[fi].live = false;
  order_.erase(std::remove(order_.begin(), order_.end(), fi), order_.end());
}

void FillPath::forget_all() {
  for (uint32_t fi : order_) fills_[fi].live = false;
  order_.clear();
}

void FillPath::retire_all() {
  for (uint32_t fi : order_) retire_landed(fills_[fi], fi);
  forget_all();
}

uint32_t FillPath::close() {
  closed_ = true;
  if (inflight_ > 0) {
    src_.drain();
    while (inflight_ > 0) {
      auto c = src_.reap(false);
      if (!c) break;
      handle(std::move(*c));
    }
  }
  for (WindowRead& r : win_) {
    if (!r.busy || !r.landed) continue;
    release(r, fill_for(r), r.comp);
  }
  return plan_.abandon_tickets();
}

bool FillPath::landed(uint32_t fi) const {
  const Fill& f = fills_[fi];
  return f.live && f.accepted == f.reads;
}

int FillPath::fill_of_window(int w) const {
  if (w < 0 || static_cast<size_t>(w) >= win_.size() || !win_[static_cast<size_t>(w)].busy) return -1;
  return static_cast<int>(win_[static_cast<size_t>(w)].fill);
}

}  // namespace resid
