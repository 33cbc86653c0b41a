fn scratch() {}
