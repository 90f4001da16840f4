// `residctl stream`: in process (every engine, every fault cell) and through the binary
// (exit statuses, the one-line errors, the run directory). Small files, seconds in all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "drivers/stream/stream.hpp"
#include "drivers/stream/stream_input.hpp"
#include "util/test_util.hpp"

using namespace resid;
using nlohmann::json;

namespace {

constexpr uint64_t kFile = 24u << 20;
constexpr uint64_t kObject = (3u << 20) + 4096 + 100;  // two reads per object, unaligned starts

json load(const std::string& path) { return test::load_json(path); }

class Stream : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = dir_.file("model.bin");
    test::write_pattern_file(file_, kFile, 5);
  }
  StreamConfig base(const std::string& out) {
    StreamConfig c;
    c.file = file_;
    c.object_bytes = kObject;
    c.out = dir_.file(out);
    c.source = SourceEngine::Uring;
    c.slots = 4;
    c.consumers = 2;
    c.passes = 2;
    c.eager_reconcile = true;
    c.watchdog_s = 30;
    return c;
  }
  // The no-fault digest for a config (cached per bundle size).
  std::string control_digest(uint32_t bundle) {
    StreamConfig c = base("control-" + std::to_string(bundle));
    c.bundle = bundle;
    EXPECT_EQ(run_stream(c), 0);
    return load(c.out + "/run.json")["verify"]["digest"];
  }
  static void expect_closed(const json& j) {
    EXPECT_TRUE(j["plan"]["balanced"].get<bool>()) << j["plan"].dump();
    EXPECT_TRUE(j["plan"]["tickets"]["balanced"].get<bool>());
    EXPECT_EQ(j["plan"]["tickets"]["live"], 0);
    EXPECT_EQ(j["plan"]["tickets"]["issued"], j["plan"]["tickets"]["retired"]);
    EXPECT_TRUE(j["plan"]["consumers"]["balanced"].get<bool>());
    EXPECT_EQ(j["windows"]["free_at_close"], j["windows"]["count"]);
    EXPECT_EQ(j["windows"]["plan_free_at_close"], j["windows"]["count"]);
    EXPECT_EQ(j["source_stats"]["inflight_at_close"], 0);
    EXPECT_EQ(j["source_stats"]["submissions"], j["source_stats"]["completions"]);
    EXPECT_EQ(j["plan"]["shutdown"], "ok");
    EXPECT_EQ(j["plan"]["reconcile_violations"], 0) << j["plan"]["first_violation"];
    EXPECT_EQ(j["verify"]["mismatches"], 0);
    EXPECT_EQ(j["allocations"]["read_path_after_start"], 0);
    EXPECT_TRUE(j["allocations"]["counter_installed"].get<bool>());
  }
  test::TempDir dir_;
  std::string file_;
};

}  // namespace

TEST_F(Stream, EveryEngineDeliversTheSameBytes) {
  std::string digest;
  for (SourceEngine e : {SourceEngine::Uring, SourceEngine::Direct, SourceEngine::Buffered}) {
    StreamConfig c = base(std::string("run-") + to_string(e));
    c.source = e;
    ASSERT_EQ(run_stream(c), 0) << to_string(e);
    const json j = load(c.out + "/run.json");
    EXPECT_EQ(j["status"], "ok") << j["error"];
    EXPECT_EQ(j["subcommand"], "stream");
    EXPECT_EQ(j["source_engine"], to_string(e));
    expect_closed(j);
    const uint64_t objects = (kFile + kObject - 1) / kObject;
    EXPECT_EQ(j["verify"]["steps"], 2 * objects);
    EXPECT_EQ(j["verify"]["steps_consumed"], 2 * objects);
    EXPECT_EQ(j["verify"]["bytes_verified"], 2 * kFile);
    EXPECT_EQ(j["plan"]["bytes_published"], 2 * kFile);
    EXPECT_EQ(j["plan"]["consumers"]["acquires"], 2 * 2 * objects);
    EXPECT_EQ(j["source_stats"]["logical_bytes"], 2 * kFile);
    EXPECT_EQ(j["source_stats"]["physical_bytes"].get<uint64_t>(),
              j["source_stats"]["logical_bytes"].get<uint64_t>() + j["source_stats"]["padding_bytes"].get<uint64_t>());
    EXPECT_EQ(j["counters"]["completions"], j["source_stats"]["completions"]);
    EXPECT_GT(j["throughput_gib_s"].get<double>(), 0.0);
    if (e == SourceEngine::Uring) {
      EXPECT_EQ(j["windows"]["count"], 8);
      EXPECT_LE(j["source_stats"]["peak_depth"].get<int>(), 8);
      EXPECT_GT(j["source_stats"]["peak_depth"].get<int>(), 1);
    } else {
      EXPECT_EQ(j["windows"]["count"], 1);
      EXPECT_EQ(j["source_stats"]["peak_depth"], 1);
    }
    if (digest.empty()) digest = j["verify"]["digest"];
    EXPECT_EQ(j["verify"]["digest"], digest) << to_string(e);
  }
}

TEST_F(Stream, RegisteredBuffersBundlesAndSmallWindows) {
  const std::string want = control_digest(1);
  StreamConfig c = base("reg");
  c.register_buffers = true;
  c.bundle = 3;
  c.window_bytes = 1u << 20;  // objects of ~3 MiB take four reads each
  c.windows = 4;
  c.depth = 3;
  ASSERT_EQ(run_stream(c), 0);
  const json j = load(c.out + "/run.json");
  expect_closed(j);
  EXPECT_TRUE(j["windows"]["registered"].get<bool>());
  EXPECT_LE(j["source_stats"]["peak_depth"].get<int>(), 3);
  EXPECT_EQ(j["verify"]["digest"], want);  // the bytes do not depend on how they were moved
}

TEST_F(Stream, EveryDeliveredByteIsCheckedAgainstAnIndependentReference) {
  const std::string want = control_digest(1);  // checksums from a buffered read of the file
  StreamConfig c = base("pattern");
  c.pattern_seed = 5;  // the file's mkregion seed: checksums from the pattern, no read
  ASSERT_EQ(run_stream(c), 0);
  json j = load(c.out + "/run.json");
  EXPECT_EQ(j["verify"]["reference"], "pattern");
  EXPECT_EQ(j["verify"]["digest"], want);
  expect_closed(j);
  // Negative control: against the wrong reference every object is a mismatch, and the run
  // fails (the verification is not vacuous), still closing balanced.
  c = base("pattern-wrong");
  c.pattern_seed = 6;
  EXPECT_EQ(run_stream(c), 1);
  j = load(c.out + "/run.json");
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["verify"]["mismatches"], j["verify"]["steps"]);
  EXPECT_EQ(std::string(j["error"]).rfind("verify: ", 0), 0u) << j["error"];
  EXPECT_TRUE(j["plan"]["balanced"].get<bool>());
}

// ---- the fault cells ---------------------------------------------------------------------------

struct CellCase {
  FaultCell cell;
  uint64_t at;
  uint32_t bundle;
  const char* expected;  // rejection kind of a fatal cell
};

void PrintTo(const CellCase& c, std::ostream* os) { *os << to_string(c.cell) << "@" << c.at; }

class FaultCells : public Stream, public ::testing::WithParamInterface<CellCase> {};

TEST_P(FaultCells, FailClosedOrRecoverExactly) {
  const CellCase k = GetParam();
  const std::string control = control_digest(k.bundle);
  StreamConfig c = base(std::string("cell-") + to_string(k.cell));
  c.fault = FaultSpec{k.cell, k.at};
  c.bundle = k.bundle;
  const int rc = run_stream(c);
  const json j = load(c.out + "/run.json");
  const json& f = j["fault"];
  ASSERT_TRUE(f.is_object());
  EXPECT_TRUE(f["fired"].get<bool>());
  EXPECT_TRUE(f["pass"].get<bool>()) << f.dump();
  EXPECT_TRUE(f["balanced"].get<bool>());
  EXPECT_TRUE(f["tickets_balanced"].get<bool>());
  EXPECT_EQ(f["windows_free_at_close"], 8);
  expect_closed(j);
  if (fault_is_fatal(k.cell)) {
    EXPECT_EQ(rc, 1);
    EXPECT_EQ(j["status"], "failed");
    EXPECT_EQ(f["class"], "fatal");
    EXPECT_EQ(f["outcome"], "failed-closed");
    EXPECT_EQ(f["rejection"], k.expected);
    EXPECT_GE(f["rejected"][k.expected].get<int>(), 1);
    EXPECT_FALSE(f["faulted_bundle_published"].get<bool>());
    const std::string err = j["error"];
    EXPECT_EQ(err.rfind(std::string("fault ") + to_string(k.cell) + ": rejected " + k.expected, 0), 0u) << err;
    // Nothing invalid is visible: every consumed object matched the file, and the run
    // stopped before the faulted bundle.
    EXPECT_LT(j["verify"]["steps_consumed"].get<uint64_t>(), j["verify"]["steps"].get<uint64_t>());
    EXPECT_EQ(j["verify"]["objects_verified"], j["verify"]["steps_consumed"]);
    EXPECT_LE(j["verify"]["steps_consumed"].get<int64_t>(), f["faulted_bundle"].get<int64_t>() * k.bundle);
  } else {
    EXPECT_EQ(rc, 0) << j["error"];
    EXPECT_EQ(j["status"], "ok");
    EXPECT_EQ(f["class"], "recoverable");
    EXPECT_EQ(f["outcome"], "recovered");
    EXPECT_EQ(j["verify"]["digest"], control);  // exactly the no-fault bytes
    EXPECT_EQ(j["verify"]["steps_consumed"], j["verify"]["steps"]);
  }
  switch (k.cell) {
    case FaultCell::OutOfOrder: EXPECT_GE(f["reordered"].get<int>(), 2); break;
    case FaultCell::HeldConsumer:
      EXPECT_EQ(f["reuse_refusal"], "consumers-live");
      EXPECT_TRUE(f["held_version_untouched"].get<bool>());
      break;
    case FaultCell::ShutdownLiveConsumer:
      EXPECT_EQ(f["shutdown_refusal"], "consumers-live");
      EXPECT_EQ(j["plan"]["shutdown_refusals"], 1);
      break;
    case FaultCell::ResetOutstanding:
      EXPECT_GE(f["reset_outstanding"].get<int>(), 1);
      EXPECT_EQ(f["tickets_invalidated"], f["reset_outstanding"]);
      EXPECT_EQ(j["plan"]["epoch"], 2);
      break;
    case FaultCell::StaleCompletion: EXPECT_GE(f["tickets_abandoned"].get<int>(), 1); break;
    default: break;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table7, FaultCells,
    ::testing::Values(CellCase{FaultCell::ShortRead, 9, 1, "short-read"}, CellCase{FaultCell::Eio, 9, 1, "read-failed"},
                      CellCase{FaultCell::OutOfOrder, 9, 1, nullptr},
                      CellCase{FaultCell::StaleCompletion, 9, 1, "stale-generation"},
                      CellCase{FaultCell::WrongObject, 9, 1, "wrong-object"},
                      CellCase{FaultCell::HeldConsumer, 2, 1, nullptr},
                      CellCase{FaultCell::ResetOutstanding, 9, 1, nullptr},
                      CellCase{FaultCell::ShutdownLiveConsumer, 0, 1, nullptr},
                      CellCase{FaultCell::BundleExtentFailure, 9, 2, "read-failed"}),
    [](const auto& p) {
      std::string n = to_string(p.param.cell);
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

TEST_F(Stream, FaultPointsThatCannotFireAreBadInput) {
  StreamConfig c = base("bad");
  c.fault = FaultSpec{FaultCell::Eio, 10000};
  EXPECT_THROW(run_stream(c), InputError);
  c.fault = FaultSpec{FaultCell::BundleExtentFailure, 0};  // single-read bundles only
  c.window_bytes = 8u << 20;
  EXPECT_THROW(run_stream(c), InputError);
  c = base("bad2");
  c.fault = FaultSpec{FaultCell::HeldConsumer, 14};
  EXPECT_THROW(run_stream(c), InputError);
  c = base("bad3");
  c.source = SourceEngine::Direct;
  c.fault = FaultSpec{FaultCell::OutOfOrder, 0};  // one window: nothing to reorder
  EXPECT_THROW(run_stream(c), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("bad")));  // nothing written
}

// ---- manifests -------------------------------------------------------------------------------

TEST_F(Stream, ManifestShapes) {
  const std::string p = dir_.file("objects.json");
  auto write = [&](const json& j) { std::ofstream(p) << j.dump(); };
  write({{"objects",
          {{{"name", "a"}, {"extents", {{{"offset", 0}, {"length", 5000}}, {{"offset", 9000}, {"length", 3}}}}, {"bytes", 5003}},
           {{"name", "b"}, {"extents", json::array({json::array({4096, 100})})}}}},
         {"step_order", {"b", "a", "b"}},
         {"file_bytes", kFile}});
  StreamObjects o = load_objects_json(p, kFile);
  ASSERT_EQ(o.objects.size(), 2u);
  EXPECT_EQ(o.objects[0].extents.size(), 2u);
  EXPECT_EQ(o.objects[0].declared_bytes, 5003u);
  EXPECT_EQ(o.objects[1].extents[0].offset, 4096u);
  EXPECT_EQ(o.order, (std::vector<std::string>{"b", "a", "b"}));
  // The llama adapter's objects.json: tensors win over its [offset, length] extents.
  write({{"schema_version", 1},
         {"objects",
          {{{"name", "embd"}, {"kind", "embd"}, {"tensors", {{{"name", "t"}, {"type", "F32"}, {"offset", 64}, {"bytes", 640}}}},
            {"bytes", 640}, {"extents", json::array({json::array({64, 640})})}}}},
         {"step_order", {"embd"}}});
  o = load_objects_json(p, kFile);
  ASSERT_EQ(o.objects.size(), 1u);
  EXPECT_EQ(o.objects[0].extents[0].offset, 64u);
  EXPECT_EQ(o.objects[0].extents[0].length, 640u);
  // A bare list.
  write(json::array({{{"name", "x"}, {"extents", {{{"offset", 0}, {"length", 1}}}}}}));
  EXPECT_EQ(load_objects_json(p, kFile).objects.size(), 1u);
  // Bad input.
  write({{"objects", json::array()}, {"file_bytes", kFile + 1}});
  EXPECT_THROW(load_objects_json(p, kFile), InputError);
  write({{"objects", {{{"name", "x"}}}}});
  EXPECT_THROW(load_objects_json(p, kFile), InputError);
  write({{"objects", {{{"name", "x"}, {"extents", {{{"offset", -1}, {"length", 1}}}}}}}});
  EXPECT_THROW(load_objects_json(p, kFile), InputError);
  std::ofstream(p) << "{not json";
  EXPECT_THROW(load_objects_json(p, kFile), InputError);
  EXPECT_THROW(load_objects_json(dir_.file("none.json"), kFile), InputError);
  EXPECT_THROW(tile_objects(kFile, 0), InputError);
  EXPECT_EQ(tile_objects(10, 3).objects.size(), 4u);
}

TEST_F(Stream, ManifestRunFollowsTheDeclaredOrder) {
  const std::string p = dir_.file("objects.json");
  std::ofstream(p) << json({{"objects",
                             {{{"name", "layer.0"}, {"tensors", {{{"offset", 100}, {"bytes", 1000000}}, {{"offset", 5000000}, {"bytes", 77}}}}},
                              {{"name", "layer.1"}, {"extents", {{{"offset", 2000000}, {"length", 3000000}}}}, {"bytes", 3000000}},
                              {{"name", "output"}, {"tensors", {{{"offset", 100}, {"bytes", 1000000}}}}}}},
                            {"step_order", {"layer.0", "layer.1", "output", "layer.1"}}})
                          .dump();
  StreamConfig c = base("manifest");
  c.object_bytes.reset();
  c.manifest = p;
  c.bundle = 2;
  ASSERT_EQ(run_stream(c), 0);
  const json j = load(c.out + "/run.json");
  expect_closed(j);
  EXPECT_EQ(j["manifest"]["objects"], 3);
  EXPECT_EQ(j["manifest"]["extents"], 4);
  EXPECT_EQ(j["manifest"]["steps"], 8);
  EXPECT_EQ(j["plan"]["bytes_published"], 2 * (1000077 + 3000000 + 1000000 + 3000000));
  EXPECT_GT(j["manifest"]["padding_bytes"].get<uint64_t>(), 0u);
  // Size disagreement, unknown step names and extents past EOF are bad input.
  std::ofstream(p) << json({{"objects", {{{"name", "a"}, {"extents", {{{"offset", 0}, {"length", 10}}}}, {"bytes", 11}}}}}).dump();
  EXPECT_THROW(run_stream(c), InputError);
  std::ofstream(p) << json({{"objects", {{{"name", "a"}, {"extents", {{{"offset", 0}, {"length", 10}}}}}}}, {"step_order", {"b"}}}).dump();
  EXPECT_THROW(run_stream(c), InputError);
  std::ofstream(p) << json({{"objects", {{{"name", "a"}, {"extents", {{{"offset", kFile - 5}, {"length", 10}}}}}}}}).dump();
  EXPECT_THROW(run_stream(c), InputError);
}

// ---- the binary ------------------------------------------------------------------------------

namespace {

using Ran = test::Spawned;

Ran run_cli(const std::vector<std::string>& args, const std::string& errfile) {
  return test::spawn_capture(RESIDCTL_PATH, args, errfile);
}

size_t lines(const std::string& s) { return test::count_lines(s); }

}  // namespace

TEST_F(Stream, CliRunsAndWritesTheRunDirectory) {
  const std::string out = dir_.file("cli-ok");
  const Ran r = run_cli({"stream", "--file", file_, "--object-bytes", std::to_string(kObject), "--out", out, "--source",
                         "uring", "--windows", "8", "--depth", "8", "--slots", "4", "--consumers", "2",
                         "--eager-reconcile"},
                        dir_.file("err"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const json j = load(out + "/run.json");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["config"]["windows"], 8);
  EXPECT_EQ(j["config"]["depth"], 8);
  expect_closed(j);  // the binary links the allocation counter too
  for (const auto& e : std::filesystem::directory_iterator(out))
    EXPECT_EQ(e.path().extension(), ".json") << e.path();  // no .tmp left behind
}

TEST_F(Stream, CliBadInputIsOneLineAndExit2) {
  const std::string out = dir_.file("cli-bad");
  const std::vector<std::vector<std::string>> bad = {
      {"stream", "--file", file_, "--out", out},                                          // neither manifest nor object-bytes
      {"stream", "--file", file_, "--out", out, "--object-bytes", "1", "--manifest", "x"},  // both
      {"stream", "--object-bytes", "4096", "--out", out},                                  // no file
      {"stream", "--file", file_, "--object-bytes", "4096"},                               // no out
      {"stream", "--file", file_, "--out", out, "--object-bytes", "-5"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--source", "mmap"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--windows", "2", "--depth", "3"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--source", "direct", "--windows", "8"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--source", "direct", "--fault", "out-of-order"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--fault", "gremlins"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--fault", "eio@x"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--fault", "recycle-live"},
      {"stream", "--file", dir_.file("missing.bin"), "--out", out, "--object-bytes", "4096"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--window-bytes", "1000"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--bundle", "9"},
      {"stream", "--file", file_, "--out", out, "--object-bytes", "4096", "--frobnicate"},
  };
  for (const auto& args : bad) {
    const Ran r = run_cli(args, dir_.file("err"));
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << joined << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("residctl: error: ", 0), 0u) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out + "/run.json")) << joined;
  }
}

TEST_F(Stream, CliFatalFaultIsExit1WithTheNamedCause) {
  const std::string out = dir_.file("cli-fault");
  const Ran r = run_cli({"stream", "--file", file_, "--object-bytes", std::to_string(kObject), "--out", out, "--fault",
                         "short-read@9"},
                        dir_.file("err"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("residctl: run failed: fault short-read: rejected short-read", 0), 0u) << r.err;
  const json j = load(out + "/run.json");
  EXPECT_EQ(j["status"], "failed");
  EXPECT_TRUE(j["fault"]["pass"].get<bool>());
  EXPECT_EQ(j["allocations"]["read_path_after_start"], 0);
}
