#include "triax/data/data_source.hpp"

#include "triax/error.hpp"

namespace triax::data {

std::string DataSource::describe_consumption(const std::vector<DatasetPosition>&, int64_t) const { return ""; }

void check_dataset_count(const std::string& what, const std::string& stage, size_t saved, size_t configured) {
  if (saved != configured)
    throw Error(what + "data stage '" + stage + "' mixes " + std::to_string(saved) + " datasets in the checkpoint, " +
                std::to_string(configured) + " in the config");
}

}  // namespace triax::data
