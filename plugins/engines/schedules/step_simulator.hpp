// Times a schedule's steps as an engine runs them (pipeline_schedule.hpp: the passes with the
// transfers placed among them): every rank runs its steps in their order; a pass takes its time;
// a send returns at once (the mpi backend's sends complete in the background) and its tensor is
// there for the receiver a transfer time later; a receive waits until then. Between two ranks the
// tensors match in the order sent, as point-to-point messages do.
//
// Unlike simulate_schedule (schedule_simulator.hpp), where every tensor leaves as the pass that
// made it ends, this sees where the sends sit in each rank's list: a send placed after later
// passes delays its receiver by those passes.
#pragma once

#include <vector>

#include "pipeline_schedule.hpp"
#include "schedule_simulator.hpp"

namespace triax::plugins {

// `steps`: each rank's, in order. A hand-over between two chunks of one rank (a send to itself)
// costs no transfer time. Throws std::logic_error when some rank waits for a tensor that is never
// sent (the steps deadlock).
SimulatedStep simulate_steps(const std::vector<std::vector<ScheduleStep>>& steps, const RankPassTimes& times);

}  // namespace triax::plugins
