// Places the transfers of a schedule among its passes by running every rank at once: a rank sends
// an activation or a gradient only at the moment its receiver asks for it, so that in each
// rank's list every send meets the matching receive of its peer, in the same order on both sides.
// Such a schedule cannot deadlock even when a send blocks until it is received (as the nccl
// backend's do), whatever the ranks' order of passes, for a ring of ranks (interleaved chunks) as
// for a V. A hand-over between two chunks of one rank becomes a send and a receive of that rank,
// one after the other.
#pragma once

#include <string>
#include <vector>

#include "pipeline_schedule.hpp"
#include "triax/abi.h"

namespace triax::plugins {

// `passes`: each rank's, in order. Throws std::logic_error naming `schedule` when some pass waits
// for one that never comes.
std::vector<std::vector<ScheduleStep>> place_transfers(const ScheduleShape& shape, triax_chunk_placement placement,
                                                       const std::vector<std::vector<Pass>>& passes,
                                                       const std::string& schedule);

// The same with the ranks' passes taken in the order of their start times (`starts`, per rank and
// pass, as the simulator gives them; on a tie the lower rank first): each send then comes soon
// after the pass that produced it, where the run above lets a rank run far ahead of its peers
// before they ask for what it made.
std::vector<std::vector<ScheduleStep>> place_transfers_in_time(const ScheduleShape& shape,
                                                               triax_chunk_placement placement,
                                                               const std::vector<std::vector<Pass>>& passes,
                                                               const std::vector<std::vector<double>>& starts,
                                                               const std::string& schedule);

// The same steps with every send moved up to just after the pass that made its tensor, for a host
// whose sends return at once and complete in the background (ABI 1.15: the mpi backend's), where
// the placement above would hold a tensor back until its receiver asks and so delay the receiver
// by the sender's passes in between. The sends to each peer keep their order, the order the
// peer receives in (point-to-point messages match in the order sent): a send whose predecessor to
// the same peer is not made yet follows that one. Receives and passes stay where they are, so the
// steps cannot deadlock where `steps` could not.
std::vector<std::vector<ScheduleStep>> place_sends_early(const std::vector<std::vector<ScheduleStep>>& steps);

}  // namespace triax::plugins
