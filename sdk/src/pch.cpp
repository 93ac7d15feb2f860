// Anchor of the shared precompiled header (pch.hpp); compiles to nothing.
