// Precompiled for every LibTorch-using translation unit of the build (see triax_use_pch).
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>
