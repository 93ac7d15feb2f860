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
