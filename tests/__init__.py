"""aiayn's tests, laid out as aiayn/ is: tests/model/ tests aiayn/model/, and so on; shared helpers at this level."""
