// The fault cells (reference 004 §5.4, Table 7), one vocabulary for every driver, and the
// Source decorator that carries out the cells that live in the source. The cells, their
// classes and what they need are written once, in source/fault_cells.json (CMake makes the
// X-macro resid_fault_cells.hpp of it; `residctl faults` prints it; the pipeline reads it).
//
// `--fault CELL[@N]` (scan, generate, stream): one named, deterministic cell. N counts in
// the cell's own unit (default 0): reads (in submission order, 0-based) for the source
// cells and reset-outstanding, steps for held-consumer (generate: global object steps
// across passes), passes for recycle-live; shutdown-live-consumer takes none. A cell fires
// at the first eligible point at or after N; one that cannot fire fails the run.
//
// Source cells, carried out by FaultySource around any engine (nothing in a driver's or the
// pager's read path knows about them):
//   short-read              the read asks the engine for half the extent; its completion is a
//                           short read of the whole extent;
//   eio                     the completion is a failed read (-EIO);
//   stale-completion        the first read on a window used before is presented with the tag
//                           of that window's previous read (a late duplicate); its own
//                           completion never comes (its ticket is abandoned at close);
//   wrong-object            the read delivers the bytes of the run's first read (another
//                           object's; a read of that very extent is not eligible);
//   bundle-extent-failure   the last read of the first bundle of two or more reads (see
//                           Source::begin_bundle) fails with -EIO after the others were submitted;
//   out-of-order            at completion N, with more reads in flight, every completion in
//                           flight is collected and handed out in reverse order (valid
//                           completions, recoverable);
//   stall                   once read N is submitted the storage stops answering: no
//                           completion comes until the source is drained (the watchdogs
//                           must end the run; a control).
// Driver cells (the drivers carry them out; the decorator is not involved; scan takes none):
//   held-consumer, reset-outstanding, shutdown-live-consumer  (stream and generate;
//                  recoverable). In generate (drivers/generate_cells.cpp): the driver holds
//                  one more consumer on a chunk of step N through the next step and asks the
//                  Plan to reuse it meanwhile (refused: consumers-live); the pager thread
//                  resets the Plan with reads in flight after read N (pager/reset.cpp); after
//                  the last token the Plan refuses to shut down under a held chunk.
//   recycle-live   a negative control (generate only): asks the Plan to recycle a chunk with
//                  a live consumer in pass N; the Plan must refuse.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "resid_fault_cells.hpp"
#include "source/source.hpp"

namespace resid {

// In fault_cells.json's order: Table 7's cells, then the engine's own controls.
enum class FaultCell : uint8_t {
#define RESID_FAULT_ENUM(e, ...) e,
  RESID_FAULT_CELLS(RESID_FAULT_ENUM)
#undef RESID_FAULT_ENUM
};
const char* to_string(FaultCell f);
std::optional<FaultCell> parse_fault_cell(std::string_view s);
// "none, short-read, eio, ...": every cell, for error messages.
std::string fault_cell_names();
// Fatal cells must fail closed (nothing of the faulted bundle published); the others must
// recover exactly (or, for recycle-live, be refused).
bool fault_is_fatal(FaultCell f);
// Carried out by FaultySource.
bool is_source_fault(FaultCell f);
// Needs reads in flight together (a depth of 2 or more).
bool fault_needs_depth(FaultCell f);
// "fatal" | "recoverable" | "control" (none: the campaign's no-fault cell; recycle-live,
// stall: checks that must be caught).
const char* fault_class(FaultCell f);
// fault_cells.json as the engine holds it: {"about", "cells": [{"cell", "class", "table_7",
// "carried_by", "needs_depth"}, ...]} (`residctl faults`).
nlohmann::json fault_cells_json();

struct FaultSpec {
  FaultCell cell = FaultCell::None;
  uint64_t at = 0;
  bool active() const { return cell != FaultCell::None; }
};
// "CELL" or "CELL@N". InputError naming the text and the cells that exist otherwise.
FaultSpec parse_fault_spec(std::string_view text);
std::string to_string(const FaultSpec& s);

// What the decorator did (read after the source's owner stopped using it).
struct FaultReport {
  bool fired = false;
  uint64_t read = 0;           // submission index of the read it hit (out-of-order: completion index)
  int window = -1;
  uint64_t tag = 0;            // the read's own tag
  uint64_t presented_tag = 0;  // the tag its completion carried (stale-completion: the previous one)
  Extent extent;               // the extent the read asked for
  Extent delivered;            // wrong-object: the extent whose bytes were delivered
  uint64_t reordered = 0;      // out-of-order: completions handed out reversed
  uint64_t withheld = 0;       // stall: completions withheld until the drain
};

struct FaultySourceHandle {
  std::unique_ptr<Source> source;
  std::shared_ptr<const FaultReport> report;  // null when no source cell was asked for
};

// Wraps `inner` with the source cell of `spec`; any other spec returns `inner` unchanged
// (report null). InputError when the cell cannot apply to this engine (out-of-order needs a
// depth of at least 2).
FaultySourceHandle with_fault(std::unique_ptr<Source> inner, const FaultSpec& spec);

}  // namespace resid
