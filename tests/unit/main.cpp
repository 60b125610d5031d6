#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
// Catch2 2.x ships the TAP reporter as a separate header; meson reads TAP.
#include <catch2/catch_reporter_tap.hpp>
