// Prints "PATH OFFSET BYTES" for every dataset of an HDF5 file whose data lies in one contiguous
// run of the file (OFFSET: where its bytes start in the file), so that a test can flip a byte
// inside any chosen tensor.
//   h5_dataset_offsets FILE
#include <hdf5.h>

#include <cstdio>

namespace {

herr_t visit(hid_t root, const char* name, const H5O_info_t* info, void*) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  const hid_t dataset = H5Dopen2(root, name, H5P_DEFAULT);
  if (dataset < 0) return -1;
  const haddr_t offset = H5Dget_offset(dataset);
  const hsize_t bytes = H5Dget_storage_size(dataset);
  if (offset != HADDR_UNDEF && bytes > 0)
    std::printf("/%s %llu %llu\n", name, static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes));
  H5Dclose(dataset);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: h5_dataset_offsets FILE\n");
    return 2;
  }
  const hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return 1;
  const herr_t status = H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit, nullptr, H5O_INFO_BASIC);
  H5Fclose(file);
  return status < 0 ? 1 : 0;
}
