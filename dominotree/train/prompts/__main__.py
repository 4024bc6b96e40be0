from dominotree.train.prompts import main

main()
