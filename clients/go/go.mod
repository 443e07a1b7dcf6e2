module authbroker

go 1.19
