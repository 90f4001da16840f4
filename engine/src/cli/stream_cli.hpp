// The `residctl stream` subcommand's flags (CLI11), kept out of main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace resid {

struct StreamCli;

// Adds the subcommand to `app`; the returned object holds the parsed values.
std::shared_ptr<StreamCli> add_stream_subcommand(CLI::App& app);
// True when the command line chose `stream`.
bool stream_selected(const StreamCli& cli);
// Checks the parsed flags (InputError for bad input) and runs the stream; returns the exit status.
int run_stream_cli(const StreamCli& cli);

}  // namespace resid
