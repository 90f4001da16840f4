// The `residctl scan` and `residctl mkregion` subcommands' flags (CLI11).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace resid {

struct ScanCli;

std::shared_ptr<ScanCli> add_scan_subcommand(CLI::App& app);
bool scan_selected(const ScanCli& cli);
// Checks the parsed flags (InputError, or "--flag is required") and runs the scan.
int run_scan_cli(const ScanCli& cli);

struct MkregionCli;
std::shared_ptr<MkregionCli> add_mkregion_subcommand(CLI::App& app);
bool mkregion_selected(const MkregionCli& cli);
int run_mkregion_cli(const MkregionCli& cli);

}  // namespace resid
