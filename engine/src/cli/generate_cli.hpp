// The `residctl generate` subcommand's flags (CLI11).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace resid {

struct GenerateCli;

std::shared_ptr<GenerateCli> add_generate_subcommand(CLI::App& app);
bool generate_selected(const GenerateCli& cli);
// Checks the parsed flags (InputError, or "--flag is required") and runs the generation.
int run_generate_cli(const GenerateCli& cli);

}  // namespace resid
