# triax_add_plugin(<target> SOURCES <files...> [LIBRARIES <libs...>])
#
# Builds a plugin as a MODULE library that links the triax SDK. In the triax build tree the
# library lands in the build's plugin folder, where `triax` finds it without configuration;
# out of tree it lands next to the project's other outputs (point TRIAX_PLUGIN_PATH or the
# YAML's plugins.paths at it).
function(triax_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET triax_sdk)
    target_link_libraries(${target} PRIVATE triax_sdk ${ARG_LIBRARIES})
  else()
    target_link_libraries(${target} PRIVATE triax::sdk ${ARG_LIBRARIES})
  endif()
  set_target_properties(${target} PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET hidden
                                            VISIBILITY_INLINES_HIDDEN ON)
  if(DEFINED TRIAX_PLUGIN_OUTPUT_DIRECTORY)
    # In the triax tree: installed into <prefix>/lib/triax/plugins, next to <prefix>/lib.
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${TRIAX_PLUGIN_OUTPUT_DIRECTORY}"
                                               INSTALL_RPATH "$ORIGIN/../..")
  endif()
  if(COMMAND triax_use_pch)
    triax_use_pch(${target})
  endif()
endfunction()

# triax_add_model_library(<target> SOURCES <files...> [LIBRARIES <libs...>])
#
# A static library of model code on the SDK, for model plugins (and tests) to link: a model
# plugin's own code, or a part several plugins share (plugins/models/moe_block). One unity
# translation unit, since LibTorch's headers dominate compile time; position-independent and
# hidden like the modules that link it. Its folder is on its users' include path.
function(triax_add_model_library target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  # triax::sdk: the imported SDK out of tree, the alias of triax_sdk in the tree.
  target_link_libraries(${target} PUBLIC triax::sdk ${ARG_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    UNITY_BUILD ON
    UNITY_BUILD_BATCH_SIZE 0
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(COMMAND triax_use_pch)
    triax_use_pch(${target})
  endif()
endfunction()

# triax_add_model_plugin(<target> PLUGIN <file> SOURCES <files...> [LIBRARIES <libs...>])
#
# Builds a model plugin in two parts: <target>_impl, a static library of the model code (SOURCES,
# triax_add_model_library) that tests link directly, and the MODULE <target> (triax_add_plugin)
# of PLUGIN alone, the registration. In the triax build tree the module is also installed into
# the plugin folder.
function(triax_add_model_plugin target)
  cmake_parse_arguments(ARG "" "PLUGIN" "SOURCES;LIBRARIES" ${ARGN})
  set(impl ${target}_impl)
  triax_add_model_library(${impl} SOURCES ${ARG_SOURCES} LIBRARIES ${ARG_LIBRARIES})
  triax_add_plugin(${target} SOURCES ${ARG_PLUGIN} LIBRARIES ${impl})
  if(DEFINED TRIAX_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${TRIAX_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
