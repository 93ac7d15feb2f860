# Token datasets: unit tests, datatrove compatibility, training on tokenized text, and the loader
# benchmark (not run by ctest, built by `cmake --build build --target triax_benches`:
# `build/bin/data_loader_bench`).
add_executable(data_test token_files_test.cpp training_data_test.cpp validation_data_test.cpp document_positions_test.cpp
  data_sources_test.cpp $<TARGET_OBJECTS:triax_config_reference>)
target_link_libraries(data_test PRIVATE triax_data GTest::gtest_main)  # the data library alone
triax_use_pch(data_test)
triax_discover_test_suites(data_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

add_executable(data_dump data_dump.cpp)
target_link_libraries(data_dump PRIVATE triax_data)

add_executable(data_loader_bench EXCLUDE_FROM_ALL data_loader_bench.cpp)
add_dependencies(triax_benches data_loader_bench)
# It reads the config itself: the loader, then the SDK's config reader the loader calls into.
target_link_libraries(data_loader_bench PRIVATE triax_data triax_config triax_sdk)
triax_use_pch(data_loader_bench)

set(TRIAX_TEST_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python")
# datatrove's DocumentTokenizer and triax's tools/tokenize write the same bytes; triax reads the
# same samples as datatrove's DatatroveFolderDataset.
add_test(NAME data_datatrove_compat
  COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/data/datatrove_compat.py
          $<TARGET_FILE:data_dump> ${PROJECT_SOURCE_DIR})
set_tests_properties(data_datatrove_compat PROPERTIES TIMEOUT 120 LABELS python)  # needs the .venv's datatrove
# The same for Parquet input: a folder of Parquet files through tools/tokenize and through
# datatrove's ParquetReader and DocumentTokenizer; the refusal of a file without the text column.
add_test(NAME data_datatrove_parquet_compat
  COMMAND ${TRIAX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/data/datatrove_parquet_compat.py ${PROJECT_SOURCE_DIR})
set_tests_properties(data_datatrove_parquet_compat PROPERTIES TIMEOUT 120 LABELS python)  # datatrove, pyarrow
# Tokenize /usr/share/common-licenses and train on it with the triax command: the loss falls.
add_test(NAME data_text_training
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/data/text_training_test.sh $<TARGET_FILE:triax> ${PROJECT_SOURCE_DIR})
set_tests_properties(data_text_training PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1" LABELS python)  # tools/tokenize needs the .venv's tokenizers
