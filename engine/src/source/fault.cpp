#include "source/fault.hpp"

#include <chrono>
#include <iterator>
#include <cstdio>
#include <thread>

#include "core/alloc_count.hpp"
#include "core/errors.hpp"

namespace resid {

namespace {

enum class Carrier : uint8_t { None, Source, Driver };

// One row of fault_cells.json.
struct CellRow {
  FaultCell cell;
  const char* name;
  const char* cls;
  bool table_7;
  Carrier carried_by;
  bool needs_depth;
};

constexpr CellRow kCells[] = {
#define RESID_FAULT_ROW(e, name, cls, table_7, by, depth) {FaultCell::e, name, cls, table_7, Carrier::by, depth},
    RESID_FAULT_CELLS(RESID_FAULT_ROW)
#undef RESID_FAULT_ROW
};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kCells); ++i)
    if (static_cast<size_t>(kCells[i].cell) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kCells is indexed by FaultCell");

const CellRow& row_of(FaultCell f) { return kCells[static_cast<size_t>(f)]; }

std::string extent_text(const Extent& e) {
  char b[64];
  std::snprintf(b, sizeof b, "[%llu, +%llu)", static_cast<unsigned long long>(e.offset),
                static_cast<unsigned long long>(e.length));
  return b;
}

// What the decorator does to the read on one window (set at submit, applied at reap).
enum class Mark : uint8_t { None, Short, Eio, Stale, Wrong };

class FaultySource final : public Source {
 public:
  FaultySource(std::unique_ptr<Source> inner, FaultSpec spec, std::shared_ptr<FaultReport> report)
      : in_(std::move(inner)), spec_(spec), rep_(std::move(report)), marks_(in_->window_count()),
        asked_(in_->window_count()), prev_tag_(in_->window_count(), 0), used_(in_->window_count(), 0) {
    pending_.reserve(in_->window_count());
    withheld_.reserve(in_->window_count());
  }

  SourceEngine engine() const override { return in_->engine(); }
  uint64_t file_size() const override { return in_->file_size(); }
  size_t window_count() const override { return in_->window_count(); }
  size_t window_capacity() const override { return in_->window_capacity(); }
  size_t window_bytes() const override { return in_->window_bytes(); }
  uint32_t alignment() const override { return in_->alignment(); }
  size_t max_inflight() const override { return in_->max_inflight(); }
  bool registered_buffers() const override { return in_->registered_buffers(); }
  int free_window() const override { return in_->free_window(); }
  size_t windows_free() const override { return in_->windows_free(); }
  size_t inflight() const override { return in_->inflight() + pending_.size() + withheld_.size(); }
  int completion_fd() override { return in_->completion_fd(); }
  // The engine's, plus the rejections the decorator made of its completions.
  SourceStats stats() const override {
    SourceStats s = in_->stats();
    s.rejections += rejections_;
    return s;
  }
  void release(const Completion& c) override { in_->release(c); }

  void begin_bundle(uint32_t reads) override {
    in_->begin_bundle(reads);
    if (spec_.cell == FaultCell::BundleExtentFailure && !armed_ && !rep_->fired && reads >= 2 &&
        submissions_ + reads - 1 >= spec_.at) {
      armed_ = true;
      arm_at_ = submissions_ + reads - 1;
    }
  }

  bool submit(const Extent& e, uint64_t tag) override {
    const int w = in_->free_window();
    if (w < 0) return false;
    if (!first_) first_ = e;
    const size_t wi = static_cast<size_t>(w);
    Extent asked = e;
    const Mark m = decide(e, wi, asked);
    if (!in_->submit(asked, tag)) return false;
    marks_[wi] = m;
    asked_[wi] = e;
    if (m != Mark::None || (stall_on_ && !rep_->fired)) record(e, w, tag, m == Mark::Stale ? prev_tag_[wi] : tag, asked);
    prev_tag_[wi] = tag;
    used_[wi] = 1;
    ++submissions_;
    return true;
  }

  std::optional<Completion> reap(bool wait) override {
    if (!pending_.empty()) return pop_pending();
    if (stalled()) return withhold(wait);
    auto c = in_->reap(wait);
    if (!c) return std::nullopt;
    ++completions_;
    if (spec_.cell == FaultCell::OutOfOrder && !rep_->fired && completions_ - 1 >= spec_.at && in_->inflight() >= 1)
      return reorder(std::move(*c));
    apply(*c);
    return c;
  }

  void drain() override {
    // The storage answers at last: a stall ends, its completions become reapable.
    if (stalled()) {
      stall_over_ = true;
      in_->drain();
      for (auto& c : withheld_) pending_.push_back(std::move(c));
      withheld_.clear();
      while (auto c = in_->reap(false)) pending_.push_back(std::move(*c));
      return;
    }
    in_->drain();
  }

 private:
  Mark decide(const Extent& e, size_t w, Extent& asked) {
    if (rep_->fired || submissions_ < spec_.at) return Mark::None;
    switch (spec_.cell) {
      case FaultCell::ShortRead:
        if (e.length < 2) return Mark::None;
        asked.length = e.length / 2;
        return Mark::Short;
      case FaultCell::Eio: return Mark::Eio;
      case FaultCell::StaleCompletion: return used_[w] ? Mark::Stale : Mark::None;
      case FaultCell::WrongObject:
        // The bytes of the run's first read: another object's, unless this read is of it.
        if (!first_ || (first_->offset == e.offset && first_->length == e.length)) return Mark::None;
        asked = *first_;
        return Mark::Wrong;
      case FaultCell::BundleExtentFailure: return armed_ && submissions_ == arm_at_ ? Mark::Eio : Mark::None;
      case FaultCell::Stall:
        stall_on_ = true;
        return Mark::None;
      default: return Mark::None;
    }
  }

  void record(const Extent& e, int w, uint64_t tag, uint64_t presented, const Extent& asked) {
    rep_->fired = true;
    rep_->read = submissions_;
    rep_->window = w;
    rep_->tag = tag;
    rep_->presented_tag = presented;
    rep_->extent = e;
    rep_->delivered = asked;
  }

  bool stalled() const { return stall_on_ && !stall_over_; }

  std::optional<Completion> withhold(bool wait) {
    while (auto c = in_->reap(false)) {
      ++rep_->withheld;
      withheld_.push_back(std::move(*c));
    }
    // A storage that stopped answering: a waiting caller waits a while and gets nothing.
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return std::nullopt;
  }

  std::optional<Completion> reorder(Completion first) {
    rep_->fired = true;
    rep_->read = completions_ - 1;
    rep_->window = first.window;
    rep_->tag = rep_->presented_tag = first.tag;
    rep_->extent = rep_->delivered = first.extent;
    apply(first);
    pending_.push_back(std::move(first));
    in_->drain();
    while (auto c = in_->reap(false)) {
      ++completions_;
      apply(*c);
      pending_.push_back(std::move(*c));
    }
    rep_->reordered = pending_.size();
    return pop_pending();
  }

  // The newest first: the order of arrival, reversed.
  std::optional<Completion> pop_pending() {
    Completion c = std::move(pending_.back());
    pending_.pop_back();
    return c;
  }

  void apply(Completion& c) {
    if (c.window < 0 || static_cast<size_t>(c.window) >= marks_.size()) return;
    const size_t w = static_cast<size_t>(c.window);
    const Mark m = marks_[w];
    marks_[w] = Mark::None;
    if (m == Mark::None || m == Mark::Wrong) return;
    if (m == Mark::Stale) {
      c.tag = rep_->presented_tag;
      return;
    }
    RejectionPathScope scope;  // the message is the rejection's, not the read path's
    if (c.ok()) ++rejections_;
    const uint64_t got = c.ok() ? c.extent.length : 0;
    c.extent = asked_[w];
    c.data = nullptr;
    if (m == Mark::Short) {
      c.reason = RejectReason::ShortRead;
      c.error = "short read of " + extent_text(c.extent) + ": got " + std::to_string(got) + " of " +
                std::to_string(c.extent.length) + " bytes (fault " + to_string(spec_.cell) + ")";
    } else {
      c.reason = RejectReason::Failed;
      c.error = "read of " + extent_text(c.extent) + " failed (EIO) (fault " + to_string(spec_.cell) + ")";
    }
  }

  std::unique_ptr<Source> in_;
  FaultSpec spec_;
  std::shared_ptr<FaultReport> rep_;
  std::vector<Mark> marks_;        // per window
  std::vector<Extent> asked_;      // per window: the extent the caller asked for
  std::vector<uint64_t> prev_tag_;  // per window: the tag of its last read
  std::vector<uint8_t> used_;
  std::vector<Completion> pending_;   // handed out newest first (out-of-order, end of a stall)
  std::vector<Completion> withheld_;  // stall
  uint64_t submissions_ = 0, completions_ = 0, rejections_ = 0;
  bool armed_ = false;
  uint64_t arm_at_ = 0;
  bool stall_on_ = false, stall_over_ = false;
  std::optional<Extent> first_;  // the run's first read (wrong-object delivers its bytes)
};

}  // namespace

const char* to_string(FaultCell f) { return row_of(f).name; }

std::optional<FaultCell> parse_fault_cell(std::string_view s) {
  for (const CellRow& r : kCells)
    if (s == r.name) return r.cell;
  return std::nullopt;
}

std::string fault_cell_names() {
  std::string s;
  for (const CellRow& r : kCells) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

bool fault_is_fatal(FaultCell f) { return std::string_view(row_of(f).cls) == "fatal"; }

bool is_source_fault(FaultCell f) { return row_of(f).carried_by == Carrier::Source; }

bool fault_needs_depth(FaultCell f) { return row_of(f).needs_depth; }

const char* fault_class(FaultCell f) { return row_of(f).cls; }

nlohmann::json fault_cells_json() {
  static constexpr const char* kCarrier[] = {"none", "source", "driver"};
  nlohmann::json cells = nlohmann::json::array();
  for (const CellRow& r : kCells)
    cells.push_back({{"cell", r.name}, {"class", r.cls}, {"table_7", r.table_7},
                     {"carried_by", kCarrier[static_cast<size_t>(r.carried_by)]}, {"needs_depth", r.needs_depth}});
  return {{"about", RESID_FAULT_CELLS_ABOUT}, {"cells", cells}};
}

FaultSpec parse_fault_spec(std::string_view text) {
  const size_t at = text.find('@');
  const auto cell = parse_fault_cell(text.substr(0, at));
  FaultSpec s;
  bool ok = cell.has_value();
  if (ok && at != std::string_view::npos) {
    const std::string_view n = text.substr(at + 1);
    ok = !n.empty() && n.size() <= 18;
    for (char ch : n) ok = ok && ch >= '0' && ch <= '9';
    if (ok) s.at = std::stoull(std::string(n));
  }
  if (!ok)
    throw InputError("--fault '" + std::string(text) + "' is not CELL or CELL@N with a cell of " + fault_cell_names());
  s.cell = *cell;
  return s;
}

std::string to_string(const FaultSpec& s) { return std::string(to_string(s.cell)) + "@" + std::to_string(s.at); }

FaultySourceHandle with_fault(std::unique_ptr<Source> inner, const FaultSpec& spec) {
  if (!is_source_fault(spec.cell)) return {std::move(inner), nullptr};
  if (fault_needs_depth(spec.cell) && inner->max_inflight() < 2)
    throw InputError(std::string("--fault ") + to_string(spec.cell) + " needs reads in flight together (--source "
                     "uring with --depth >= 2); --source " + to_string(inner->engine()) + " has depth " +
                     std::to_string(inner->max_inflight()));
  auto report = std::make_shared<FaultReport>();
  auto src = std::make_unique<FaultySource>(std::move(inner), spec, report);
  return {std::move(src), std::move(report)};
}

}  // namespace resid
