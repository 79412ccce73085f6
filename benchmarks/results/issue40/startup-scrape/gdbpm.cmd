set pagination off
break main.main
run --help
python
import os
pid = gdb.selected_inferior().pid
os.system("python3 ./pmap.py %d /work/main/bin/edgequorum-agent ./init.pages" % pid)
end
kill
quit
