/* Single-op ORT cases for the nn family (see opcase.h). */
#include "opcase.h"

const opcase opcases_nn[] = {
    {0},
};
