#include "app.hpp"

int main(int argc, char** argv) { return dsh::run(argc, argv); }
